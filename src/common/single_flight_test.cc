#include "common/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tierkv {
namespace {

TEST(SingleFlightTest, TheFirstCallerLeadsAndTheOthersGetItsResult) {
  SingleFlight<std::string, int> flights;
  auto lead = flights.Join("k");
  ASSERT_TRUE(lead.leader);
  EXPECT_TRUE(flights.InFlight("k"));
  auto other = flights.Join("k");
  EXPECT_FALSE(other.leader);
  EXPECT_EQ(other.ticket, lead.ticket);
  EXPECT_TRUE(flights.Join("j").leader);  // keys are apart

  std::atomic<int> got{0};
  std::thread follower([&] { got = other.ticket->Wait(); });
  flights.Forget("k", lead.ticket);
  EXPECT_FALSE(flights.InFlight("k"));
  lead.ticket->Finish(42);
  follower.join();
  EXPECT_EQ(got.load(), 42);
  EXPECT_TRUE(flights.Join("k").leader);  // after Forget, a new flight
}

TEST(SingleFlightTest, ForgetLeavesANewerFlightOfTheKeyAlone) {
  SingleFlight<std::string, int> flights;
  auto first = flights.Join("k");
  flights.Forget("k", first.ticket);
  auto second = flights.Join("k");
  ASSERT_TRUE(second.leader);
  flights.Forget("k", first.ticket);  // late: not its flight any more
  EXPECT_TRUE(flights.InFlight("k"));
}

TEST(SingleFlightTest, AWaitWithATimeoutEndsEmptyWhenNothingFinished) {
  FlightTicket<int> t;
  EXPECT_FALSE(t.WaitFor(std::chrono::milliseconds(1)).has_value());
  t.Finish(7);
  EXPECT_EQ(t.WaitFor(std::chrono::milliseconds(1)).value(), 7);
}

TEST(SingleFlightTest, ManyCallersOfOneKeyMakeOneComputation) {
  SingleFlight<std::string, int> flights;
  std::atomic<int> computations{0};
  std::vector<std::thread> threads;
  std::vector<int> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto f = flights.Join("k");
      if (!f.leader) {
        results[t] = f.ticket->Wait();
        return;
      }
      // The leader finishes once every other caller joined: the table and
      // the 8 callers hold the ticket.
      ++computations;
      while (f.ticket.use_count() < 9) std::this_thread::yield();
      flights.Forget("k", f.ticket);
      f.ticket->Finish(5);
      results[t] = 5;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(computations.load(), 1);
  for (int r : results) EXPECT_EQ(r, 5);
}

}  // namespace
}  // namespace tierkv
