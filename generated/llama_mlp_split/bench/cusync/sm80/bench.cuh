// cusync sm80 backend, bench drivers only: the hooks of cusync/bench/chain_bench.cuh for an sm80 chain:
// orders are the ticket order (spec, ticket, hw), run() is the overlapped run, no baselines.
#pragma once

#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cusync/bench/chain_bench.cuh"

namespace cusync::sm80 {

struct BenchHooks {
  static constexpr bool kBaselines = false;
  static constexpr char const* kOrders = "spec,ticket,hw";
  static constexpr char const* kOrdersError = "--orders takes spec, ticket and hw";
  static constexpr bool kOrderedSequential = false;  // the order does not change run_sequential()
  static constexpr char const* kUsageMore = "";      // no options of its own
  template <typename Value>
  static bool parse_more(std::string const&, Value&, bench::ChainOptions&, bench::Usage const&) { return false; }
  static bool order_ok(std::string const& order) { return order == "spec" || order == "ticket" || order == "hw"; }

  template <typename Chain>
  static Status overlapped(Chain& chain, cudaStream_t stream) { return chain.run(stream); }
  template <typename Chain>
  void reset(Chain&) {}
  template <typename Chain>
  static void set_order(Chain& chain, std::string const& order, bool spec_ticket_order) {
    chain.set_ticket_order(order == "spec" ? spec_ticket_order : order == "ticket");
  }

  // Nothing measured beyond the variants: no more JSON fields.
  struct Measured {
    bool ok() const { return true; }
    template <typename TimeOf>
    void print(int, TimeOf const&) const {}
  };
  template <typename Bench>
  void before(Bench&) {}
  template <typename Bench>
  Measured measure(Bench&, int, std::vector<std::vector<unsigned char>> const&, bench::Interleaved&) { return {}; }
};

}  // namespace cusync::sm80
