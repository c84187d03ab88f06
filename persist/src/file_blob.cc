#include "file_blob.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/random/random.h"
#include "str_cat.h"
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weir/errno_message.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

absl::Status errno_status(int error, std::string_view what, std::string_view path) {
  const std::string message =
      internal::str_cat("blob ", what, " \"", path, "\": ", weir::errno_message(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }
  // Closes now, reporting the error close() may return.
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

absl::Status fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return errno_status(errno, "open directory", dir);
  }
  if (::fsync(fd.get()) != 0) {
    return errno_status(errno, "fsync directory", dir);
  }
  return absl::OkStatus();
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// Creates `dir` and its missing parents; fsyncs the parent of each directory it creates so that
// the new entry is durable. `durable` (may be null) is the set of directories known durable: a
// directory found already there and not in it (another thread's mkdir, whose parent fsync may not
// have finished) gets its parent fsynced here too before it is used.
absl::Status make_dirs(const std::string& dir, DurableDirs* durable) {
  if (dir.empty() || dir == "/" || dir == ".") {
    return absl::OkStatus();
  }
  if (durable && durable->contains(dir)) {
    return absl::OkStatus();
  }
  const std::string parent = parent_of(dir);
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          internal::str_cat("blob path \"", dir, "\" is not a directory"));
    }
  } else {
    WEIR_RETURN_IF_ERROR(make_dirs(parent, durable));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_status(errno, "mkdir", dir);
    }
  }
  WEIR_RETURN_IF_ERROR(fsync_dir(parent));
  if (durable) {
    durable->count_fsync();
    durable->insert(dir);
  }
  return absl::OkStatus();
}

absl::Status write_all(int fd, std::string_view value, const std::string& path) {
  while (!value.empty()) {
    const ssize_t n = ::write(fd, value.data(), value.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_status(errno, "write", path);
    }
    value.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Appends every regular file under `dir` (relative name `rel`) to `out`. Directories that vanish
// while we walk (a concurrent remove) are skipped.
absl::Status walk(const std::string& dir, const std::string& rel, std::string_view prefix,
                  std::vector<BlobMetadata>& out) {
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::OkStatus();
    }
    return errno_status(errno, "list", dir);
  }
  absl::Status status;
  while (true) {
    errno = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir is safe for a stream no other thread reads.
    const dirent* entry = ::readdir(handle);
    if (entry == nullptr) {
      if (errno != 0) {
        status = errno_status(errno, "list", dir);
      }
      break;
    }
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") {
      continue;
    }
    const std::string key = rel.empty() ? std::string(name) : internal::str_cat(rel, "/", name);
    // Only descend where keys with `prefix` can be.
    const size_t common = std::min(key.size(), prefix.size());
    if (key.compare(0, common, prefix.substr(0, common)) != 0) {
      continue;
    }
    const std::string full = internal::str_cat(dir, "/", name);
    struct stat st;
    if (::fstatat(dirfd(handle), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        continue;
      }
      status = errno_status(errno, "stat", full);
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      status = walk(full, key, prefix, out);
      if (!status.ok()) {
        break;
      }
    } else if (S_ISREG(st.st_mode) && key.starts_with(prefix)) {
      out.push_back({key, static_cast<uint64_t>(st.st_size)});
    }
  }
  ::closedir(handle);
  return status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileBlob>> FileBlob::open(std::string root) {
  while (root.size() > 1 && root.back() == '/') {
    root.pop_back();
  }
  if (root.empty()) {
    return absl::InvalidArgumentError("file blob: empty directory");
  }
  WEIR_RETURN_IF_ERROR(make_dirs(root, nullptr));
  return std::unique_ptr<FileBlob>(new FileBlob(std::move(root)));
}

absl::StatusOr<std::optional<std::string>> FileBlob::get(std::string_view key) {
  WEIR_RETURN_IF_ERROR(validate_blob_key(key));
  const std::string file = path(key);
  Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return std::nullopt;
    }
    return errno_status(errno, "open", file);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return errno_status(errno, "stat", file);
  }
  std::string value;
  value.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < value.size()) {
    const ssize_t n = ::read(fd.get(), value.data() + done, value.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_status(errno, "read", file);
    }
    if (n == 0) {
      break;  // Keys are never rewritten, so this is a file shorter than it was at fstat.
    }
    done += static_cast<size_t>(n);
  }
  value.resize(done);
  return value;
}

absl::Status FileBlob::set(std::string_view key, std::string_view value) {
  WEIR_RETURN_IF_ERROR(validate_blob_key(key));
  const std::string file = path(key);
  const std::string dir = parent_of(file);
  thread_local absl::BitGen gen;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".tmp-%016llx",
                static_cast<unsigned long long>(absl::Uniform<uint64_t>(gen)));
  const std::string temp = file + suffix;
  // A concurrent remove() may delete a directory we just made, or the parent of one we are
  // making (it prunes directories left empty); try again then. Made or removed since: it and its
  // parents are not known durable any more.
  constexpr int kAttempts = 32;
  const auto forget_dirs = [&] {
    for (std::string d = dir; d.size() > root_.size(); d = parent_of(d)) durable_.erase(d);
  };
  for (int attempt = 1;; ++attempt) {
    if (absl::Status made = make_dirs(dir, &durable_); !made.ok()) {
      if (absl::IsNotFound(made) && attempt < kAttempts) {
        forget_dirs();
        continue;
      }
      return made;
    }
    Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) {
      if (errno == ENOENT && attempt < kAttempts) {
        forget_dirs();
        continue;
      }
      return errno_status(errno, "create", temp);
    }
    absl::Status status = write_all(fd.get(), value, temp);
    if (status.ok() && ::fsync(fd.get()) != 0) {
      status = errno_status(errno, "fsync", temp);
    }
    if (fd.close() != 0 && status.ok()) {
      status = errno_status(errno, "close", temp);
    }
    if (status.ok() && ::rename(temp.c_str(), file.c_str()) != 0) {
      status = errno_status(errno, "rename", temp);
    }
    if (!status.ok()) {
      ::unlink(temp.c_str());
      return status;
    }
    durable_.count_fsync();
    return fsync_dir(dir);
  }
}

absl::Status FileBlob::remove(std::string_view key) {
  WEIR_RETURN_IF_ERROR(validate_blob_key(key));
  const std::string file = path(key);
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
    return errno_status(errno, "remove", file);
  }
  // Remove directories left empty, up to the root; a non-empty one stops us.
  std::string dir = parent_of(file);
  while (dir.size() > root_.size() && ::rmdir(dir.c_str()) == 0) {
    durable_.erase(dir);
    dir = parent_of(dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BlobMetadata>> FileBlob::list_keys(std::string_view prefix) {
  std::vector<BlobMetadata> keys;
  WEIR_RETURN_IF_ERROR(walk(root_, "", prefix, keys));
  return keys;
}

}  // namespace weir::persist::internal
