// Stream<T, D>: a handle to an operator output port producing records of type D at times T.
//
// A stream is a cheap, copyable reference into its scope. Connecting it to an operator input
// adds a consumer; a stream may have any number of consumers (each sees every record).
//
// Thread safety: worker-local. Note: the scope must outlive the handle's use.

#pragma once

#include <memory>

#include "weir/dataflow/scope.h"
#include "weir/progress/location.h"

namespace weir {

template <Timestamp T, class D>
class Stream {
 public:
  using Time = T;
  using Data = D;

  Stream(Scope<T>& scope, Source source) : scope_(&scope), source_(source) {}

  Scope<T>& scope() const { return *scope_; }
  Source source() const { return source_; }

  // Adds `target` as a consumer through `pact`; returns the target's channel end.
  template <class Pact>
  std::shared_ptr<ChannelEnd<T, D>> connect_to(Target target, const Pact& pact) const {
    return scope_->template connect<D>(source_, target, pact);
  }

 private:
  Scope<T>* scope_;
  Source source_;
};

}  // namespace weir
