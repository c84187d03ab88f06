#include "hostfile.h"

#include <gtest/gtest.h>

namespace weir::protocol {
namespace {

TEST(HostfileTest, ParsesOneAddressPerProcess) {
  auto addresses =
      parse_hostfile("# cluster\n127.0.0.1:4000\n\n  node-b:4001  \n[::1]:4002\n", "hf", 3);
  ASSERT_TRUE(addresses.ok()) << addresses.status();
  EXPECT_EQ(*addresses, (std::vector<std::string>{"127.0.0.1:4000", "node-b:4001", "[::1]:4002"}));
}

TEST(HostfileTest, RefusesWhatIsNotAHostfile) {
  auto refused = [](std::string_view text, size_t processes, const std::string& words) {
    auto addresses = parse_hostfile(text, "hosts.txt", processes);
    ASSERT_FALSE(addresses.ok());
    EXPECT_NE(addresses.status().message().find(words), std::string::npos) << addresses.status();
    EXPECT_NE(addresses.status().message().find("hosts.txt"), std::string::npos);
  };
  refused("127.0.0.1:4000\n", 2, "lists 1 addresses, but -n is 2");
  refused("a:1\nb:2\nc:3\n", 2, "lists 3");
  refused("127.0.0.1\n", 1, "line 1");
  refused("a:1\nhost:0\n", 2, "line 2");
  refused("host:70000\n", 1, "not in 1..65535");
  refused("host:12ab\n", 1, "not in 1..65535");
  refused("::1:4000\n", 1, "brackets");
  refused("a:1\na:1\n", 2, "listed twice");
}

TEST(HostfileTest, MissingFileIsAnError) {
  EXPECT_EQ(read_hostfile("/nonexistent/hostfile", 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(read_hostfile("", 2).ok());
}

TEST(HostfileTest, LoopbackAddressesAreKnownByTheirHost) {
  for (const char* address :
       {"127.0.0.1:4000", "127.3.2.1:1", "localhost:4000", "LocalHost:9", "[::1]:4000"}) {
    EXPECT_TRUE(is_loopback(address)) << address;
  }
  for (const char* address :
       {"10.0.0.1:4000", "192.0.2.1:4000", "0.0.0.0:4000", "128.0.0.1:1", "node-b:4001",
        "localhost.example.com:1", "[::2]:4000", "[fe80::1]:4000", "127.0.0.1.example.com:1"}) {
    EXPECT_FALSE(is_loopback(address)) << address;
  }
}

TEST(HostfileTest, ClusterIdFollowsTheAddresses) {
  const std::string a = derive_cluster_id({"127.0.0.1:4000", "127.0.0.1:4001"});
  EXPECT_EQ(a, derive_cluster_id({"127.0.0.1:4000", "127.0.0.1:4001"}));
  EXPECT_NE(a, derive_cluster_id({"127.0.0.1:4001", "127.0.0.1:4000"}));
  EXPECT_NE(a, derive_cluster_id({"127.0.0.1:4000", "127.0.0.1:4002"}));
  EXPECT_EQ(a.rfind("hostfile-", 0), 0u);
}

}  // namespace
}  // namespace weir::protocol
