// EtcdCluster: starts Debian's etcd (1 or 3 members) on free loopback ports in
// a temporary directory, with --unsafe-no-fsync, and stops it. A missing etcd
// binary aborts the test binary (it is installed by the README's commands).
#ifndef TIERKV_TESTS_ETCD_PROCESS_H_
#define TIERKV_TESTS_ETCD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace tierkv::testing {

class EtcdCluster {
 public:
  // Starts `members` members and waits until every one reports healthy.
  explicit EtcdCluster(int members = 1);
  ~EtcdCluster();  // SIGKILL every member, remove the directory
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:PORT" of member i, and all of them comma-separated.
  std::string client_addr(int i) const;
  std::string endpoints() const;
  void Kill(int i);     // SIGKILL
  void Pause(int i);    // SIGSTOP (a member that hangs)
  void Resume(int i);   // SIGCONT
  void Restart(int i);  // start a killed member again with its data
  bool Healthy(int i) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  void Spawn(int i, bool existing);

  std::string dir_;
  std::vector<Member> members_;
  std::string initial_cluster_;
};

// A port on 127.0.0.1 that was free a moment ago, below the kernel's
// ephemeral range when there is room (etcd_process.cc).
int FreeLoopbackPort();

}  // namespace tierkv::testing

#endif  // TIERKV_TESTS_ETCD_PROCESS_H_
