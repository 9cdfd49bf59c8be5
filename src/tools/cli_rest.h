// `tierkv stat` (no key), `tierkv segments` and `tierkv key`: read a manager's
// REST admin API and print it for people.
#ifndef TIERKV_TOOLS_CLI_REST_H_
#define TIERKV_TOOLS_CLI_REST_H_

#include <string>

namespace tierkv::cli {

// Exit status 0 on success; 1 for an unknown key; 3 when the API cannot be
// reached or answers with an error (printed to stderr).
int RunStatSummary(const std::string& rest_url);
int RunSegments(const std::string& rest_url);
// `tierkv members`: the cluster's live members (/cluster/members).
int RunMembers(const std::string& rest_url);
int RunKey(const std::string& rest_url, const std::string& key, const std::string& tenant);

}  // namespace tierkv::cli

#endif  // TIERKV_TOOLS_CLI_REST_H_
