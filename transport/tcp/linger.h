// Graceful close of healthy TCP sockets (internal to the TCP backend; loop thread only).
//
// Closing a socket that still holds unread input makes the kernel answer with a RST, and a RST
// makes the peer's kernel drop what the peer had not read yet: the peer would lose our last
// frames (say, the final barrier message of a process that exits right after it), because the
// frames it sent meanwhile (an ADVERT for a receive it just posted, a CREDIT) were still unread
// here. So a socket is not closed at once: linger_close() sends our FIN after our data and keeps
// the socket; finish_lingering() (run when the Context closes: TcpBackend::shutdown) then reads
// and drops every kept socket's input, all of them at once, until each peer closed too or has
// been quiet for 50 ms with our bytes acknowledged, bounded by 1 s in all, and closes them.
// Sockets kept longer than that (an endpoint closed long before the Context) are reaped the next
// time either function runs.
#pragma once

namespace tictac::transport::tcp {

void linger_close(int fd);
void finish_lingering();

}  // namespace tictac::transport::tcp
