/*
 * comm.c — em_comm: listening, wiring the mesh of TCP connections, and the
 * one transfer primitive the collectives are written with
 * (em__comm_exchange). See comm.h for why transfers are poll()-driven.
 *
 * Wiring: rank i connects to every j > i and accepts the connections of
 * every j < i on its listener; the connecting side introduces itself with
 * a hello (magic, rank, size) so that the acceptor can tell which rank a
 * socket belongs to whatever order they arrive in. Connects never wait for
 * an accept (the kernel completes them against the listen backlog), so the
 * order in which ranks call em_comm_connect does not matter.
 */
#define _GNU_SOURCE /* MSG_NOSIGNAL, accept4 */
#include "comm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELLO_MAGIC 0x454d4331u /* "EMC1" */
#define DEFAULT_TIMEOUT_MS 60000
#define MAX_RANKS 4096

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int poll_ms(int64_t ms) {
    return ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

static bool set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

static void close_fds(em_comm *comm) {
    if (comm->fds)
        for (int r = 0; r < comm->size; r++)
            if (comm->fds[r] >= 0) {
                close(comm->fds[r]);
                comm->fds[r] = -1;
            }
}

/* ---- lifetime ------------------------------------------------------------ */

em_status em_comm_listen(const char *host, em_comm **out, int *port) {
    if (out)
        *out = NULL;
    if (!out || !port)
        return em__fail(EM_ERR_ARGUMENT, "comm_listen: NULL argument");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    const char *h = host ? host : "127.0.0.1";
    if (inet_pton(AF_INET, h, &addr.sin_addr) != 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "comm_listen: host \"%.64s\" is not a numeric IPv4 "
                        "address",
                        h);
    em_comm *c = calloc(1, sizeof *c);
    if (!c)
        return em__fail(EM_ERR_OOM, "comm_listen: out of memory");
    c->listen_fd = -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t len = sizeof addr;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) ||
        listen(fd, 128) ||
        getsockname(fd, (struct sockaddr *)&addr, &len) ||
        !set_nonblocking(fd)) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        free(c);
        return em__fail(EM_ERR_RUNTIME, "comm_listen: cannot listen on %s: %s",
                        h, strerror(err));
    }
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        close(fd);
        free(c);
        return em__fail(EM_ERR_RUNTIME, "comm_listen: cannot make a lock");
    }
    atomic_init(&c->refcount, 1);
    c->self = c;
    c->listen_fd = fd;
    c->timeout_ms = DEFAULT_TIMEOUT_MS;
    *port = ntohs(addr.sin_port);
    *out = c;
    return EM_OK;
}

void em_comm_retain(em_comm *comm) {
    if (comm)
        atomic_fetch_add(&comm->refcount, 1);
}

void em_comm_release(em_comm *comm) {
    if (!comm || atomic_fetch_sub(&comm->refcount, 1) != 1)
        return;
    close_fds(comm);
    if (comm->listen_fd >= 0)
        close(comm->listen_fd);
    if (comm->nccl)
        em__nccl_destroy(comm);
    pthread_mutex_destroy(&comm->lock);
    free(comm->fds);
    free(comm);
}

/* Lock-free (a collective may hold the lock for as long as its timeout):
 * shutting the sockets down wakes any transfer in progress, which then
 * fails; the descriptors themselves are closed on release, so that no
 * thread polls a number the kernel has handed out again. */
void em_comm_close(em_comm *comm) {
    if (!comm)
        return;
    atomic_store(&comm->closed, true);
    shutdown(comm->listen_fd, SHUT_RDWR);
    if (atomic_load(&comm->connected))
        for (int r = 0; r < comm->size; r++)
            if (comm->fds[r] >= 0)
                shutdown(comm->fds[r], SHUT_RDWR);
}

int em_comm_rank(const em_comm *comm) {
    return comm && atomic_load(&((em_comm *)comm)->connected) ? comm->rank : 0;
}
int em_comm_size(const em_comm *comm) {
    return comm && atomic_load(&((em_comm *)comm)->connected) ? comm->size : 0;
}

/* ---- wiring --------------------------------------------------------------- */

/* Wait until fd is ready for `events` or the deadline passes. */
static bool wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, poll_ms(deadline - now_ms()));
        if (n > 0)
            return true;
        if (n == 0 || errno != EINTR)
            return false;
    }
}

/* Blocking-with-deadline transfer on one socket (wiring only). */
static bool io_all(int fd, void *buf, size_t len, bool sending,
                   int64_t deadline) {
    char *p = buf;
    while (len) {
        ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL)
                            : recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return false;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline))
                return false;
        } else {
            return false;
        }
    }
    return true;
}

static int connect_to(const char *host, int port, int64_t deadline) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return -1;
    /* A listener that is not up yet refuses: retry until the deadline. */
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || !set_nonblocking(fd)) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
        int r = connect(fd, (struct sockaddr *)&addr, sizeof addr);
        if (r == 0)
            return fd;
        if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline)) {
            int err = 0;
            socklen_t len = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
                err == 0)
                return fd;
        }
        close(fd);
        if (now_ms() >= deadline)
            return -1;
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

em_status em_comm_connect(em_comm *comm, int rank, int size,
                          const char *const *hosts, const int *ports,
                          const em_comm_options *opts) {
    if (!comm || !hosts || !ports)
        return em__fail(EM_ERR_ARGUMENT, "comm_connect: NULL argument");
    if (size < 1 || size > MAX_RANKS || rank < 0 || rank >= size)
        return em__fail(EM_ERR_ARGUMENT,
                        "comm_connect: rank %d of size %d: size must be in "
                        "[1, %d] and rank in [0, size)",
                        rank, size, MAX_RANKS);
    for (int r = 0; r < size; r++)
        if (r != rank && (!hosts[r] || ports[r] <= 0 || ports[r] > 65535))
            return em__fail(EM_ERR_ARGUMENT,
                            "comm_connect: rank %d's address is missing or "
                            "its port %d is out of range",
                            r, ports[r]);
    em_status st = EM_OK;
    pthread_mutex_lock(&comm->lock);
    if (comm->fds || atomic_load(&comm->closed)) {
        st = em__fail(EM_ERR_ARGUMENT,
                      "comm_connect: the communicator is %s",
                      atomic_load(&comm->closed) ? "closed"
                                                 : "already connected");
        goto done;
    }
    int *fds = malloc(sizeof *fds * (size_t)size);
    if (!fds) {
        st = em__fail(EM_ERR_OOM, "comm_connect: out of memory");
        goto done;
    }
    for (int r = 0; r < size; r++)
        fds[r] = -1;
    comm->fds = fds;
    comm->size = size;
    comm->rank = rank;
    if (opts && opts->timeout_ms > 0)
        comm->timeout_ms = opts->timeout_ms;
    const int64_t deadline = now_ms() + comm->timeout_ms;
    uint32_t hello[3] = {HELLO_MAGIC, (uint32_t)rank, (uint32_t)size};
    for (int r = rank + 1; r < size && st == EM_OK; r++) {
        int fd = connect_to(hosts[r], ports[r], deadline);
        if (fd < 0) {
            st = em__fail(EM_ERR_RUNTIME,
                          "comm_connect: rank %d cannot connect to rank %d at "
                          "%.64s:%d",
                          rank, r, hosts[r], ports[r]);
            break;
        }
        tune(fd);
        fds[r] = fd;
        if (!io_all(fd, hello, sizeof hello, true, deadline))
            st = em__fail(EM_ERR_RUNTIME,
                          "comm_connect: rank %d cannot greet rank %d", rank,
                          r);
    }
    for (int accepted = 0; accepted < rank && st == EM_OK; accepted++) {
        int fd = -1;
        while (fd < 0) {
            fd = accept4(comm->listen_fd, NULL, NULL,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                           errno == EINTR)) {
                if (!wait_fd(comm->listen_fd, POLLIN, deadline))
                    break;
            } else if (fd < 0) {
                break;
            }
        }
        uint32_t peer[3];
        if (fd < 0 || !io_all(fd, peer, sizeof peer, false, deadline)) {
            if (fd >= 0)
                close(fd);
            st = em__fail(EM_ERR_RUNTIME,
                          "comm_connect: rank %d waited %lld ms for the "
                          "connections of ranks below it (%d of %d came)",
                          rank, (long long)comm->timeout_ms, accepted, rank);
            break;
        }
        if (peer[0] != HELLO_MAGIC || peer[2] != (uint32_t)size ||
            peer[1] >= (uint32_t)rank || fds[peer[1]] >= 0) {
            close(fd);
            st = em__fail(EM_ERR_RUNTIME,
                          "comm_connect: rank %d got an unexpected greeting "
                          "(rank %u of size %u)",
                          rank, peer[1], peer[2]);
            break;
        }
        tune(fd);
        fds[peer[1]] = fd;
    }
    if (st != EM_OK) {
        close_fds(comm);
        snprintf(comm->broken_reason, sizeof comm->broken_reason,
                 "its connection failed");
        atomic_store(&comm->broken, true);
    } else {
        atomic_store(&comm->connected, true);
    }
done:
    pthread_mutex_unlock(&comm->lock);
    return st;
}

/* ---- transfers ------------------------------------------------------------ */

em_status em__comm_check_usable(em_comm *comm, const char *op) {
    if (atomic_load(&comm->closed))
        return em__fail(EM_ERR_ARGUMENT, "%s: the communicator is closed", op);
    if (atomic_load(&comm->broken))
        return em__fail(EM_ERR_RUNTIME,
                        "%s: the communicator is broken (%s); make a new one",
                        op, comm->broken_reason);
    if (!atomic_load(&comm->connected))
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: the communicator is not connected yet", op);
    return EM_OK;
}

static em_status broken(em_comm *comm, const char *op, const char *fmt,
                        int peer, const char *detail) {
    char msg[160];
    snprintf(msg, sizeof msg, fmt, peer, detail);
    /* A close of our own shows as a failed transfer: say so. */
    if (atomic_load(&comm->closed))
        snprintf(msg, sizeof msg, "the communicator was closed meanwhile");
    snprintf(comm->broken_reason, sizeof comm->broken_reason, "%.32s: %.200s", op,
             msg);
    atomic_store(&comm->broken, true);
    return em__fail(EM_ERR_RUNTIME, "distributed %s: %s", op, msg);
}

em_status em__comm_exchange(em_comm *comm, const char *op, int to,
                            const void *send_buf, size_t send_len, int from,
                            void *recv_buf, size_t recv_len) {
    em_status st = em__comm_check_usable(comm, op);
    if (st != EM_OK)
        return st;
    const char *out = send_buf;
    char *in = recv_buf;
    size_t sent = 0, got = 0;
    int sfd = send_len ? comm->fds[to] : -1;
    int rfd = recv_len ? comm->fds[from] : -1;
    int64_t last_progress = now_ms();
    /* Move bytes while the sockets take them; poll only when both would
     * block (half the system calls of a poll before every transfer). */
    while (sent < send_len || got < recv_len) {
        bool progress = false;
        if (got < recv_len) {
            ssize_t k = recv(rfd, in + got, recv_len - got, 0);
            if (k > 0) {
                got += (size_t)k;
                progress = true;
            } else if (k == 0 || errno == ECONNRESET) {
                return broken(comm, op, "peer rank %d closed the connection%s",
                              from, "");
            } else if (errno != EAGAIN && errno != EWOULDBLOCK &&
                       errno != EINTR) {
                return broken(comm, op, "receiving from peer rank %d: %s",
                              from, strerror(errno));
            }
        }
        if (sent < send_len) {
            ssize_t k = send(sfd, out + sent, send_len - sent, MSG_NOSIGNAL);
            if (k > 0) {
                sent += (size_t)k;
                progress = true;
            } else if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) {
                return broken(comm, op, "peer rank %d closed the connection%s",
                              to, "");
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                       errno != EINTR) {
                return broken(comm, op, "sending to peer rank %d: %s", to,
                              strerror(errno));
            }
        }
        if (progress) {
            last_progress = now_ms();
            continue;
        }
        struct pollfd p[2];
        nfds_t n = 0;
        if (sent < send_len)
            p[n++] = (struct pollfd){.fd = sfd, .events = POLLOUT};
        if (got < recv_len) {
            if (n == 1 && sfd == rfd)
                p[0].events |= POLLIN;
            else
                p[n++] = (struct pollfd){.fd = rfd, .events = POLLIN};
        }
        int ready =
            poll(p, n, poll_ms(last_progress + comm->timeout_ms - now_ms()));
        if (ready < 0 && errno != EINTR)
            return broken(comm, op, "poll failed with peer rank %d: %s",
                          sent < send_len ? to : from, strerror(errno));
        if (ready == 0) {
            char waited[32];
            snprintf(waited, sizeof waited, "%lld",
                     (long long)comm->timeout_ms);
            return broken(comm, op,
                          "peer rank %d did not answer for %s ms (timeout)",
                          got < recv_len ? from : to, waited);
        }
    }
    return EM_OK;
}

/* ---- holders -------------------------------------------------------------- */

static void holder_release(void *ctx) { em_comm_release(ctx); }

em_status em__comm_holder(em_comm *comm, em_array **out) {
    em_comm_retain(comm);
    em_status st = em_from_external(&comm->self, sizeof comm->self, NULL, 0,
                                    EM_U64, holder_release, comm, out);
    if (st != EM_OK)
        em_comm_release(comm);
    else
        (*out)->host_only = true; /* the collective reads it on the host */
    return st;
}

em_comm *em__comm_from_holder(const em_array *holder) {
    em_comm *c;
    memcpy(&c, em__data(holder), sizeof c);
    return c;
}
