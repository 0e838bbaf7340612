// Fake fabric: device contexts, queries, PDs, MRs, completion channels and CQs.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/verbs/fake/fabric_state.h"

namespace tictac::verbs::fake {
namespace {

constexpr int kGidTableLen = 4;
constexpr int kValidMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                               IBV_ACCESS_RELAXED_ORDERING;

template <typename T>
T* fail(int err) {
  errno = err;
  return nullptr;
}

}  // namespace

ibv_context* FabricState::open_device(Device* dev) {
  std::lock_guard lk(mu);
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;  // errno from eventfd
  auto ctx = std::make_unique<Context>();
  ctx->h.owner = ctx.get();
  ctx->device = dev;
  ibv_context& c = ctx->h.ibv;
  c.device = &dev->h.ibv;
  c.cmd_fd = -1;
  c.async_fd = fd;
  c.num_comp_vectors = 1;
  c.abi_compat = nullptr;  // not an extended context: the header's verbs_get_ctx_op() finds nothing
  // The static-inline calls of <infiniband/verbs.h> (ibv_post_send, ibv_poll_cq, ...) dispatch
  // through these, so code that bypasses the table still reaches the fake.
  c.ops.post_send = [](ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    Qp* q = owner_of<Qp>(qp);
    return q->ctx->device->fabric->post_send(q, wr, bad);
  };
  c.ops.post_recv = [](ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    Qp* q = owner_of<Qp>(qp);
    return q->ctx->device->fabric->post_recv(q, wr, bad);
  };
  c.ops.poll_cq = [](ibv_cq* cq, int n, ibv_wc* wc) {
    Cq* c = owner_of<Cq>(cq);
    return c->ctx->device->fabric->poll_cq(c, n, wc);
  };
  c.ops.req_notify_cq = [](ibv_cq* cq, int solicited_only) {
    Cq* c = owner_of<Cq>(cq);
    return c->ctx->device->fabric->req_notify_cq(c, solicited_only);
  };
  ibv_context* out = &c;
  contexts.emplace(ctx.get(), std::move(ctx));
  return out;
}

int FabricState::close_device(Context* ctx) {
  std::lock_guard lk(mu);
  if (ctx->pds + ctx->cqs + ctx->channels + ctx->qps > 0 || ctx->async_waiters > 0) return EBUSY;
  ::close(ctx->h.ibv.async_fd);
  contexts.erase(ctx);
  return 0;
}

int FabricState::query_device(Context* ctx, ibv_device_attr* attr) {
  std::lock_guard lk(mu);
  *attr = ibv_device_attr{};
  std::strncpy(attr->fw_ver, "tictac-fake-1.0", sizeof(attr->fw_ver) - 1);
  attr->node_guid = htobe64(ctx->device->guid);
  attr->sys_image_guid = htobe64(ctx->device->guid);
  attr->max_mr_size = UINT64_MAX;
  attr->page_size_cap = 0xfffff000;
  attr->vendor_id = 0;
  attr->vendor_part_id = 0;
  attr->hw_ver = 1;
  attr->max_qp = 1 << 20;
  attr->max_qp_wr = options.max_qp_wr;
  attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  attr->max_sge = options.max_sge;
  attr->max_sge_rd = options.max_sge;
  attr->max_cq = 1 << 20;
  attr->max_cqe = options.max_cqe;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 20;
  attr->max_qp_rd_atom = options.max_qp_rd_atom;
  attr->max_qp_init_rd_atom = options.max_qp_rd_atom;
  attr->max_res_rd_atom = options.max_qp_rd_atom * (1 << 20);
  attr->atomic_cap = IBV_ATOMIC_NONE;
  attr->max_pkeys = 1;
  attr->phys_port_cnt = static_cast<std::uint8_t>(ctx->device->ports.size());
  return 0;
}

int FabricState::query_port(Context* ctx, std::uint8_t port_num, ibv_port_attr* attr) {
  std::lock_guard lk(mu);
  if (port_num < 1 || port_num > ctx->device->ports.size()) return EINVAL;
  const Port& p = ctx->device->ports[port_num - 1];
  *attr = ibv_port_attr{};
  attr->state = p.state;
  attr->max_mtu = p.spec.max_mtu;
  attr->active_mtu = p.spec.max_mtu;
  attr->gid_tbl_len = kGidTableLen;
  attr->port_cap_flags = 0;
  attr->max_msg_sz = 1U << 31;
  attr->pkey_tbl_len = 1;
  attr->lid = p.lid;
  attr->sm_lid = p.spec.link_layer == IBV_LINK_LAYER_INFINIBAND ? 1 : 0;
  attr->active_width = 2;   // 4x
  attr->active_speed = 64;  // HDR
  attr->phys_state = p.state == IBV_PORT_ACTIVE ? 5 : 3;  // LinkUp : Disabled
  attr->link_layer = p.spec.link_layer;
  return 0;
}

int FabricState::query_gid(Context* ctx, std::uint8_t port_num, int index, ibv_gid* gid) {
  std::lock_guard lk(mu);
  if (port_num < 1 || port_num > ctx->device->ports.size() || index < 0 || index >= kGidTableLen) {
    errno = EINVAL;
    return -1;
  }
  const Port& p = ctx->device->ports[port_num - 1];
  *gid = static_cast<std::size_t>(index) < p.gids.size() ? p.gids[index] : ibv_gid{};
  return 0;
}

ibv_pd* FabricState::alloc_pd(Context* ctx) {
  std::lock_guard lk(mu);
  auto pd = std::make_unique<Pd>();
  pd->h.owner = pd.get();
  pd->ctx = ctx;
  pd->h.ibv.context = &ctx->h.ibv;
  pd->h.ibv.handle = next_handle++;
  ++ctx->pds;
  ibv_pd* out = &pd->h.ibv;
  pds.emplace(pd.get(), std::move(pd));
  return out;
}

int FabricState::dealloc_pd(Pd* pd) {
  std::lock_guard lk(mu);
  if (pd->mrs + pd->qps > 0) return EBUSY;
  --pd->ctx->pds;
  pds.erase(pd);
  return 0;
}

ibv_mr* FabricState::reg_mr(Pd* pd, void* addr, std::size_t length, std::uint64_t iova,
                            int access) {
  std::lock_guard lk(mu);
  if ((access & ~kValidMrAccess) != 0) return fail<ibv_mr>(EINVAL);
  // Remote write/atomic access needs local write, as the kernel insists.
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
      (access & IBV_ACCESS_LOCAL_WRITE) == 0) {
    return fail<ibv_mr>(EINVAL);
  }
  if (length == 0) return fail<ibv_mr>(EINVAL);
  if (addr == nullptr) return fail<ibv_mr>(EFAULT);  // nothing to pin
  if (length > options.max_locked_bytes - locked_bytes) return fail<ibv_mr>(ENOMEM);
  auto mr = std::make_unique<Mr>();
  mr->h.owner = mr.get();
  mr->pd = pd;
  mr->iova = iova;
  mr->base = static_cast<char*>(addr);
  mr->length = length;
  mr->access = access;
  // Keys: unique for the fabric's life, never 0, so a stale key never matches a new region.
  const std::uint32_t key = (next_key++ << 8) | 0x5a;
  ibv_mr& m = mr->h.ibv;
  m.context = &pd->ctx->h.ibv;
  m.pd = &pd->h.ibv;
  m.addr = addr;
  m.length = length;
  m.handle = next_handle++;
  m.lkey = key;
  m.rkey = key;
  ++pd->mrs;
  locked_bytes += length;
  ++registrations.mrs_registered;
  registrations.bytes_registered += length;
  registrations.peak_locked_bytes = std::max(registrations.peak_locked_bytes, locked_bytes);
  ibv_mr* out = &m;
  mrs.emplace(key, std::move(mr));
  return out;
}

ibv_mr* FabricState::reg_dmabuf_mr(Pd* pd, std::uint64_t offset, std::size_t length,
                                   std::uint64_t iova, int fd, int access) {
  // The kernel resolves the fd to a dma-buf; here it only has to be an open descriptor.
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return fail<ibv_mr>(EBADF);
  // Device memory in the tests' scripted CUDA table is host memory, so `iova` (the device
  // pointer, as callers pass it) is also the host address the fake copies from and to.
  ibv_mr* mr = reg_mr(pd, reinterpret_cast<void*>(static_cast<std::uintptr_t>(iova)), length,
                      iova, access);
  if (mr == nullptr) return nullptr;
  std::lock_guard lk(mu);
  Mr* m = mrs.at(mr->lkey).get();
  m->dmabuf_fd = fd;
  m->dmabuf_offset = offset;
  return mr;
}

int FabricState::dereg_mr(Mr* mr) {
  std::lock_guard lk(mu);
  // A dma-buf closed while its MR lives is a caller bug the kernel would hide (it holds its own
  // reference); count it so tests catch it.
  if (mr->dmabuf_fd >= 0 && ::fcntl(mr->dmabuf_fd, F_GETFD) < 0) ++dmabuf_closed_before_dereg;
  --mr->pd->mrs;
  locked_bytes -= mr->length;
  mrs.erase(mr->h.ibv.lkey);
  return 0;
}

ibv_comp_channel* FabricState::create_comp_channel(Context* ctx) {
  std::lock_guard lk(mu);
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto ch = std::make_unique<Channel>();
  ch->h.owner = ch.get();
  ch->ctx = ctx;
  ch->h.ibv.context = &ctx->h.ibv;
  ch->h.ibv.fd = fd;
  ch->h.ibv.refcnt = 0;
  ++ctx->channels;
  ibv_comp_channel* out = &ch->h.ibv;
  channels.emplace(ch.get(), std::move(ch));
  return out;
}

int FabricState::destroy_comp_channel(Channel* ch) {
  std::lock_guard lk(mu);
  if (ch->cqs > 0 || ch->waiters > 0) return EBUSY;
  ::close(ch->h.ibv.fd);
  --ch->ctx->channels;
  channels.erase(ch);
  return 0;
}

ibv_cq* FabricState::create_cq(Context* ctx, int cqe, void* cq_context, Channel* ch,
                               int comp_vector) {
  std::lock_guard lk(mu);
  if (cqe < 1 || cqe > options.max_cqe) return fail<ibv_cq>(EINVAL);
  if (comp_vector < 0 || comp_vector >= ctx->h.ibv.num_comp_vectors) return fail<ibv_cq>(EINVAL);
  if (ch != nullptr && ch->ctx != ctx) return fail<ibv_cq>(EINVAL);
  auto cq = std::make_unique<Cq>();
  cq->h.owner = cq.get();
  cq->ctx = ctx;
  cq->channel = ch;
  cq->capacity = cqe;
  ibv_cq& c = cq->h.ibv;
  c.context = &ctx->h.ibv;
  c.channel = ch != nullptr ? &ch->h.ibv : nullptr;
  c.cq_context = cq_context;
  c.handle = next_handle++;
  c.cqe = cqe;
  ++ctx->cqs;
  if (ch != nullptr) {
    ++ch->cqs;
    ++ch->h.ibv.refcnt;
  }
  ibv_cq* out = &c;
  cqs.emplace(cq.get(), std::move(cq));
  return out;
}

int FabricState::destroy_cq(Cq* cq) {
  std::lock_guard lk(mu);
  if (cq->qps > 0 || cq->comp_events_unacked > 0 || cq->async_events_unacked > 0) return EBUSY;
  if (Channel* ch = cq->channel; ch != nullptr) {
    // Pending (not yet read) events of this CQ vanish with it; keep the eventfd count in step.
    const auto dropped = std::erase(ch->events, cq);
    for (std::size_t i = 0; i < dropped; ++i) {
      std::uint64_t one = 0;
      (void)!::read(ch->h.ibv.fd, &one, sizeof(one));
    }
    --ch->cqs;
    --ch->h.ibv.refcnt;
  }
  --cq->ctx->cqs;
  cqs.erase(cq);
  return 0;
}

}  // namespace tictac::verbs::fake
