#pragma once
// What the EPContext loading (ep_context.cpp) and generation (generate.cpp) share: the shared workspace of
// ep.share_ep_contexts and small helpers. Private to epstack::ep_context.
#include <epstack/ep_context/contexts.hpp>

#include <compare>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::ctx::internal {

// The shared workspace of ep.share_ep_contexts, per provider type: while generating, the builder every session of
// the group adds its graphs to and the binary's path (named by the first session); while loading, binaries mapped by
// one session with the graphs no session has taken yet.
struct workspace {
  std::mutex mu;
  // Held by a sharing session for the whole of its generation: the sessions of a group add to one builder and the
  // last writes it, one at a time (taken before `mu`, never while holding it).
  std::mutex gen_mu;
  struct gen_entry {
    std::shared_ptr<ep_context_builder> builder;
    std::filesystem::path bin_path;
  };
  // Held weakly: the binary stays mapped while a session uses it, and the workspace never keeps it alive by itself
  // (no mapping outlives the last session that loaded from it; a later session then reads the file again).
  struct load_entry {
    std::weak_ptr<const ep_context_binary> binary;
    std::set<std::string, std::less<>> remaining;
  };
  std::map<std::string, gen_entry, std::less<>> gen;
  std::map<std::string, std::map<std::string, load_entry>, std::less<>> load;  // provider -> binary path -> entry
};
workspace& shared_workspace();

std::string stack_of(const std::vector<provider_binding>& providers);
std::string joined(const std::vector<std::string>& v);
std::vector<std::string> io_names(const graph& g, std::span<const value_id> ids, bool skip_constants);
Status bad_graph(std::string_view node, const std::string& why);

// A partition of some graph of the model: its graph's plan and its index there.
struct part_ref {
  const graph_plan* gp = nullptr;
  std::size_t k = 0;
  [[nodiscard]] const partition& get() const { return gp->partitions[k]; }
  auto operator<=>(const part_ref&) const = default;
};

// The fused partitions that provider p caches, in every graph of the model (the main graph first, then the bodies
// of its control-flow nodes, depth first), each graph's in execution order.
std::vector<part_ref> cached_partitions(const partition_plan& plan, const std::vector<provider_binding>& providers,
                                        std::size_t p);

}  // namespace epstack::ctx::internal
