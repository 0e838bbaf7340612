#include "transport/verbs/backend/handshake.h"

#include <sys/epoll.h>

#include <cerrno>

#include "common/log.h"

namespace tictac::verbs {

// ---------------------------------------------------------------------------------------------
// Acceptor

Acceptor::Acceptor(std::shared_ptr<Device> device, const SideToken& token, int fd,
                   std::chrono::milliseconds timeout, Done done, std::function<void()> finished)
    : dev_(std::move(device)),
      token_(token),
      timeout_(timeout),
      stream_(fd),
      done_(std::move(done)),
      finished_(std::move(finished)) {}

Acceptor::~Acceptor() {
  if (watching_) dev_->engine().unwatch(stream_.fd());
  if (timer_ != 0) dev_->engine().cancel_timer(timer_);
}

void Acceptor::start() {
  timer_ = dev_->engine().add_timer(transport::Clock::now() + timeout_, [this] {
    timer_ = 0;
    finish(Status(StatusCode::timeout, "the verbs peer " + peer_address_of(stream_.fd()) +
                                           " did not finish the QP exchange within " +
                                           std::to_string(timeout_.count()) +
                                           " ms (TICTAC_HANDSHAKE_TIMEOUT)"));
  });
  Result<SideAuth> auth =
      SideAuth::start(auth::Role::acceptor, token_, "verbs://" + peer_address_of(stream_.fd()));
  Status st = auth.status();
  if (auth.ok()) {
    auth_.emplace(std::move(auth).value());
    st = dev_->engine().watch(stream_.fd(), EPOLLIN, [this](std::uint32_t ev) { on_events(ev); });
  }
  if (!st.ok()) {
    dev_->engine().defer(lifetime_.guard([this, st] { finish(st); }));
    return;
  }
  watching_ = true;
}

void Acceptor::on_events(std::uint32_t) {
  if (state_ == State::done) return;
  Status st = step();
  if (!st.ok()) finish(st);
}

Status Acceptor::step() {
  TICTAC_RETURN_IF_ERROR(stream_.flush());
  if (state_ == State::authenticate) {  // nothing is allocated for the peer before this passes
    Result<bool> passed = auth_->step(stream_);
    TICTAC_RETURN_IF_ERROR(passed);
    if (!*passed) {
      return dev_->engine().rearm(stream_.fd(), stream_.writing() ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }
    auth_.reset();
    state_ = State::read_info;
    TICTAC_RETURN_IF_ERROR(
        dev_->engine().rearm(stream_.fd(), stream_.writing() ? EPOLLIN | EPOLLOUT : EPOLLIN));
  }
  if (state_ == State::read_info) {
    Result<bool> full = stream_.fill(kQpInfoBytes);
    TICTAC_RETURN_IF_ERROR(full);
    if (!*full) return Status::Ok();
    Result<QpInfo> peer = decode_qp_info(stream_.take(kQpInfoBytes));
    TICTAC_RETURN_IF_ERROR(peer);
    TICTAC_RETURN_IF_ERROR(check_peer_limits(*peer, dev_->config()));
    Result<std::unique_ptr<VerbsEndpoint>> ep = VerbsEndpoint::create(dev_);
    TICTAC_RETURN_IF_ERROR(ep);
    ep_ = std::move(ep).value();
    TICTAC_RETURN_IF_ERROR(ep_->connect(*peer));
    TICTAC_RETURN_IF_ERROR(stream_.write(encode(ep_->local_info())));
    state_ = State::read_ready;
    TICTAC_RETURN_IF_ERROR(
        dev_->engine().rearm(stream_.fd(), stream_.writing() ? EPOLLIN | EPOLLOUT : EPOLLIN));
  }
  if (state_ == State::read_ready) {
    if (!stream_.writing()) TICTAC_RETURN_IF_ERROR(dev_->engine().rearm(stream_.fd(), EPOLLIN));
    Result<bool> full = stream_.fill(1);
    TICTAC_RETURN_IF_ERROR(full);
    if (!*full) return Status::Ok();
    if (stream_.take(1)[0] != kReadyByte) {
      return Status(StatusCode::protocol_error,
                    "the verbs peer sent a bad ready byte after the QP exchange");
    }
    dev_->engine().unwatch(stream_.fd());
    watching_ = false;
    const std::string local = local_address_of(stream_.fd());
    const std::string peer = peer_address_of(stream_.fd());
    TICTAC_RETURN_IF_ERROR(ep_->activate(stream_.release(), local, peer));
    finish(std::move(ep_));
  }
  return Status::Ok();
}

void Acceptor::finish(Result<std::unique_ptr<VerbsEndpoint>> result) {
  if (state_ == State::done) return;
  state_ = State::done;
  if (watching_) {
    dev_->engine().unwatch(stream_.fd());
    watching_ = false;
  }
  if (timer_ != 0) {
    dev_->engine().cancel_timer(timer_);
    timer_ = 0;
  }
  ep_.reset();
  done_(std::move(result));
  finished_();
}

// ---------------------------------------------------------------------------------------------
// Connector

Connector::Connector(std::shared_ptr<Device> device, const SideToken& token, sockaddr_in addr,
                     std::string address, transport::Clock::time_point deadline,
                     transport::ConnectFn done, std::function<void()> finished)
    : dev_(std::move(device)),
      token_(token),
      addr_(addr),
      address_(std::move(address)),
      retry_(dev_->engine(), deadline, transport::scaffold::Backoff::constant(kConnectRetry),
             std::move(done), std::move(finished), [this] { release(); }) {}

Connector::~Connector() { abandon(); }

void Connector::start() {
  auto starting = retry_.starting();  // a report made in here comes from a loop event
  retry_.watch_deadline(Status(StatusCode::timeout,
                               "no verbs peer completed the QP exchange at " + address_ +
                                   " before the connect deadline (is anybody listening there?)"));
  retry_.schedule(transport::Clock::now(), [this] { attempt(); });
}

void Connector::drop_socket() {
  if (stream_ && watching_) dev_->engine().unwatch(stream_->fd());
  watching_ = false;
  stream_.reset();
}

void Connector::release() {
  state_ = State::done;
  drop_socket();
  auth_.reset();
  ep_.reset();
}

void Connector::abandon() { retry_.abandon(); }

void Connector::attempt() {
  if (state_ == State::done) return;
  int err = 0;
  Result<int> fd = connect_side(addr_, &err);
  if (!fd.ok()) {
    retry_or_fail(fd.status(), err);
    return;
  }
  stream_ = std::make_unique<SideStream>(*fd);
  state_ = State::connecting;
  Status st = dev_->engine().watch(*fd, EPOLLOUT, [this](std::uint32_t ev) { on_events(ev); });
  if (!st.ok()) {
    finish(st);
    return;
  }
  watching_ = true;
}

void Connector::retry_or_fail(const Status& why, int err) {
  drop_socket();
  auth_.reset();
  ep_.reset();
  state_ = State::idle;
  if (err == ECONNREFUSED) {  // nobody listens yet: only this is retried
    retry_.retry(
        [this] { attempt(); },
        Status(StatusCode::timeout, "nobody listens at verbs://" + address_ +
                                        " (connection refused until the connect deadline)"));
    return;
  }
  finish(
      Status(why.code(), "cannot reach verbs://" + address_ + ": " + why.message(), why.origin()));
}

void Connector::on_events(std::uint32_t) {
  if (state_ == State::done) return;
  const auto self = lifetime_.token();
  Status st = step();
  if (!self.alive() || state_ == State::done) return;
  if (!st.ok()) {
    if (state_ == State::connecting) {
      retry_or_fail(st, connect_errno_);
    } else {
      finish(Status(st.code(), "QP exchange with verbs://" + address_ + " failed: " + st.message(),
                    st.origin()));
    }
  }
}

Status Connector::step() {
  if (state_ == State::connecting) {
    TICTAC_RETURN_IF_ERROR(connect_result(stream_->fd(), &connect_errno_));
    Result<SideAuth> auth = SideAuth::start(auth::Role::initiator, token_, "verbs://" + address_);
    if (!auth.ok()) {
      finish(auth.status());
      return Status::Ok();
    }
    auth_.emplace(std::move(auth).value());
    state_ = State::authenticate;
  }
  if (state_ == State::authenticate) {
    Result<bool> passed = auth_->step(*stream_);
    TICTAC_RETURN_IF_ERROR(passed);
    if (*passed) {
      auth_.reset();
      Result<std::unique_ptr<VerbsEndpoint>> ep = VerbsEndpoint::create(dev_);
      if (!ep.ok()) {
        finish(ep.status());
        return Status::Ok();
      }
      ep_ = std::move(ep).value();
      state_ = State::read_info;
      TICTAC_RETURN_IF_ERROR(stream_->write(encode(ep_->local_info())));
    }
  }
  TICTAC_RETURN_IF_ERROR(stream_->flush());
  if (state_ == State::read_info) {
    Result<bool> full = stream_->fill(kQpInfoBytes);
    TICTAC_RETURN_IF_ERROR(full);
    if (*full) {
      Result<QpInfo> peer = decode_qp_info(stream_->take(kQpInfoBytes));
      TICTAC_RETURN_IF_ERROR(peer);
      TICTAC_RETURN_IF_ERROR(check_peer_limits(*peer, dev_->config()));
      TICTAC_RETURN_IF_ERROR(ep_->connect(*peer));
      const std::byte ready[1] = {kReadyByte};
      TICTAC_RETURN_IF_ERROR(stream_->write(ready));
      state_ = State::send_ready;
    }
  }
  if (state_ == State::send_ready && !stream_->writing()) {
    dev_->engine().unwatch(stream_->fd());
    watching_ = false;
    const std::string local = local_address_of(stream_->fd());
    const std::string peer = peer_address_of(stream_->fd());
    TICTAC_RETURN_IF_ERROR(ep_->activate(stream_->release(), local, peer));
    stream_.reset();
    finish(std::unique_ptr<transport::Endpoint>(std::move(ep_)));
    return Status::Ok();
  }
  return dev_->engine().rearm(stream_->fd(), stream_->writing() ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

void Connector::finish(Result<std::unique_ptr<transport::Endpoint>> result) {
  if (state_ == State::done) return;
  retry_.report(std::move(result));
}

}  // namespace tictac::verbs
