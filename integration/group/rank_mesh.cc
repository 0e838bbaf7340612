#include "integration/group/rank_mesh.h"

#include <charconv>

#include "common/log.h"
#include "integration/group/backend_choice.h"

namespace tictac::group {
namespace {

std::string addr_key(const std::string& prefix, int rank) {
  return prefix + "tictac/addr/" + std::to_string(rank);
}

Status with_context(const Status& s, const std::string& what) {
  return Status(s.code(), what + ": " + s.message(), s.origin());
}

}  // namespace

std::string mesh_peer_name(const std::string& key_prefix, int rank, int size) {
  return "tictac-group " + key_prefix + " rank " + std::to_string(rank) + " of " +
         std::to_string(size);
}

int parse_mesh_peer_name(const std::string& name, const std::string& key_prefix, int size) {
  const std::string head = "tictac-group " + key_prefix + " rank ";
  const std::string tail = " of " + std::to_string(size);
  if (name.size() <= head.size() + tail.size() || name.rfind(head, 0) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0) {
    return -1;
  }
  const char* first = name.data() + head.size();
  const char* last = name.data() + name.size() - tail.size();
  int rank = -1;
  const auto [end, ec] = std::from_chars(first, last, rank);
  if (ec != std::errc() || end != last || rank < 0 || rank >= size) return -1;
  return rank;
}

int RankMesh::rank_of(transport::PeerId peer) const {
  const auto it = ranks_.find(peer);
  return it == ranks_.end() ? -1 : it->second;
}

Result<std::unique_ptr<RankMesh>> RankMesh::connect(bootstrap::Store& store,
                                                    transport::Context& context,
                                                    const MeshOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return invalid_argument("rank " + std::to_string(options.rank) + " is outside a group of " +
                            std::to_string(options.size));
  }
  std::unique_ptr<RankMesh> mesh(new RankMesh());
  mesh->peers_.assign(static_cast<std::size_t>(options.size), transport::kNoPeer);
  mesh->backends_.assign(static_cast<std::size_t>(options.size), "");
  if (options.size == 1) return mesh;

  if (options.listen_addresses.empty()) return invalid_argument("group mesh: no listen address");
  std::vector<std::string> bound_list;
  std::vector<std::string> preference;
  for (const std::string& address : options.listen_addresses) {
    Result<std::string> bound = context.listen(address);
    if (!bound.ok()) {
      return with_context(bound.status(), "rank " + std::to_string(options.rank) +
                                              " cannot listen on " + address +
                                              " (set TICTAC_LISTEN_ADDR to a local address, or "
                                              "drop " + scheme_of(address) + " from TICTAC_BACKENDS)");
    }
    bound_list.push_back(*bound);
    preference.push_back(scheme_of(*bound));
  }
  mesh->address_ = bound_list.front();
  mesh->addresses_ = join_addresses(bound_list);
  TICTAC_RETURN_IF_ERROR(store.set_string(addr_key(options.key_prefix, options.rank), mesh->addresses_));
  TICTAC_LOG(debug) << "group " << options.key_prefix << ": rank " << options.rank
                    << " listens on " << mesh->addresses_;

  // Lower ranks: we connect.
  for (int r = 0; r < options.rank; ++r) {
    Result<std::string> addr = store.get_string(addr_key(options.key_prefix, r), options.timeout);
    if (!addr.ok()) {
      return with_context(addr.status(), "rank " + std::to_string(r) +
                                              " never published its address");
    }
    const std::string chosen = pick_address(preference, split_addresses(*addr));
    if (chosen.empty()) {
      return invalid_argument("rank " + std::to_string(options.rank) + " (backends " +
                              join_addresses(preference) + ") shares no backend with rank " +
                              std::to_string(r) + " (which listens on " + *addr +
                              "); set the same TICTAC_BACKENDS on every rank");
    }
    Result<transport::PeerId> peer = context.connect(chosen);
    if (!peer.ok()) {
      return with_context(peer.status(), "cannot connect to rank " + std::to_string(r) + " at " +
                                             chosen);
    }
    Result<std::string> name = context.peer_name(*peer);
    const int got = name.ok() ? parse_mesh_peer_name(*name, options.key_prefix, options.size) : -1;
    if (got != r) {
      return Status(StatusCode::protocol_error,
                    "the process at " + *addr + " is not rank " + std::to_string(r) +
                        " of this group (it calls itself '" + (name.ok() ? *name : "?") +
                        "'); a stale address in the store, or two jobs sharing one store prefix");
    }
    mesh->peers_[static_cast<std::size_t>(r)] = *peer;
    mesh->ranks_[*peer] = r;
    mesh->backends_[static_cast<std::size_t>(r)] = scheme_of(chosen);
  }
  // Higher ranks: they connect to us.
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  for (int pending = options.size - 1 - options.rank; pending > 0; --pending) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    Result<transport::PeerId> peer = context.accept(std::max(left, std::chrono::milliseconds(0)));
    if (!peer.ok()) {
      std::string missing;
      for (int r = options.rank + 1; r < options.size; ++r) {
        if (mesh->peers_[static_cast<std::size_t>(r)] == transport::kNoPeer) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      return with_context(peer.status(), "rank " + std::to_string(options.rank) +
                                              " waited for ranks " + missing + " to connect");
    }
    Result<std::string> name = context.peer_name(*peer);
    const int r = name.ok() ? parse_mesh_peer_name(*name, options.key_prefix, options.size) : -1;
    if (r <= options.rank || mesh->peers_[static_cast<std::size_t>(r)] != transport::kNoPeer) {
      return Status(StatusCode::protocol_error,
                    "rank " + std::to_string(options.rank) + " was reached by '" +
                        (name.ok() ? *name : "?") + "', which is not an expected higher rank of " +
                        "this group; two jobs sharing one store prefix?");
    }
    mesh->peers_[static_cast<std::size_t>(r)] = *peer;
    mesh->ranks_[*peer] = r;
    // The higher rank picked the first of ITS backends that we offer; its list is in the store
    // (published before it connected).
    Result<std::string> theirs = store.get_string(addr_key(options.key_prefix, r), options.timeout);
    TICTAC_RETURN_IF_ERROR(theirs);
    std::vector<std::string> their_preference;
    for (const std::string& a : split_addresses(*theirs)) their_preference.push_back(scheme_of(a));
    mesh->backends_[static_cast<std::size_t>(r)] = scheme_of(pick_address(their_preference, bound_list));
  }
  return mesh;
}

}  // namespace tictac::group
