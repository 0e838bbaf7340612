// RankMesh: connects one transport Context to every other rank of a group through a Store.
// Each rank listens on one address per backend (backend_choice.h), publishes them as
// "<prefix>tictac/addr/<rank>" = "ucx://..,tcp://.." (its preference order), connects to every
// lower rank over the first backend of its own list that the peer published, and accepts every
// higher one; handshake names ("tictac-group <prefix> rank R of N") tell who is who, so a
// peer from another group, a duplicate or an out-of-range rank is refused with an error naming
// it. Blocking; call once. Afterwards the mapping is immutable and thread-safe to read.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "transport/bootstrap/store.h"
#include "transport/context.h"

namespace tictac::group {

struct MeshOptions {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{30'000};
  // One "<backend>://ip:port" per backend, in preference order (see choose_listen_address()).
  std::vector<std::string> listen_addresses;
  std::string key_prefix;      // store key prefix (and group identity in handshake names)
};

// The name a rank's Context must carry for the mesh to recognise it.
std::string mesh_peer_name(const std::string& key_prefix, int rank, int size);
// The rank in such a name, or -1 when it is not a name of this group of this size.
int parse_mesh_peer_name(const std::string& name, const std::string& key_prefix, int size);

class RankMesh {
 public:
  static Result<std::unique_ptr<RankMesh>> connect(bootstrap::Store& store,
                                                   transport::Context& context,
                                                   const MeshOptions& options);

  transport::PeerId peer(int rank) const { return peers_.at(static_cast<std::size_t>(rank)); }
  // -1 for a peer that is not in the mesh.
  int rank_of(transport::PeerId peer) const;
  // The first published address, and all of them (joined with ',').
  const std::string& address() const { return address_; }
  const std::string& addresses() const { return addresses_; }
  // The backend ("tcp", "ucx", ...) the connection to `rank` runs over; "" for self.
  const std::string& backend_of(int rank) const { return backends_.at(static_cast<std::size_t>(rank)); }

 private:
  RankMesh() = default;
  std::vector<transport::PeerId> peers_;  // by rank; kNoPeer for self
  std::unordered_map<transport::PeerId, int> ranks_;
  std::vector<std::string> backends_;     // by rank; "" for self
  std::string address_;
  std::string addresses_;
};

}  // namespace tictac::group
