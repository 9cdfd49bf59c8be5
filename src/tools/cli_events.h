// `tierkv events`: follows a manager's KV event stream and prints it.
#ifndef TIERKV_TOOLS_CLI_EVENTS_H_
#define TIERKV_TOOLS_CLI_EVENTS_H_

#include <cstdint>
#include <string>

namespace tierkv::cli {

struct EventsOptions {
  std::string endpoint = "tcp://127.0.0.1:5557";
  bool json = false;       // one JSON object per event instead of a text line
  uint64_t count = 0;      // stop after this many events (0: never)
  double seconds = 0;      // stop after this long (0: never)
  double stats_every = 5;  // seconds between "rate/gap" status lines on stderr (0: off)
};

// Subscribes and prints until a limit is reached. Returns the exit status
// (0; 3 when the endpoint cannot be used).
int RunEvents(const EventsOptions& options);

}  // namespace tierkv::cli

#endif  // TIERKV_TOOLS_CLI_EVENTS_H_
