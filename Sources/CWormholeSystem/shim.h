/* SPDX-License-Identifier: Apache-2.0 */
// Only what Swift cannot import from the Linux headers the process's machinery uses (the
// event loop, the inotify instance, the doorbell's socket, the diagnostic timeline): macros,
// variadic functions and declarations glibc makes only under `_GNU_SOURCE`. Every symbol here
// carries the module prefix.
#ifndef CWORMHOLESYSTEM_SHIM_H
#define CWORMHOLESYSTEM_SHIM_H

// Linux event APIs the Glibc module does not export, for the loop's thread.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
// The doorbell's datagram socket (credentials in ancillary data need the CMSG_* macros).
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Names the calling thread (what /proc/PID/task/TID/comm and `ps -T` show; 15 bytes at most).
/// prctl is variadic, which Swift cannot call.
static inline int cwormhole_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// The credentials and closed descriptors of one received datagram: `*uid` is `(unsigned)-1`
/// and `*pid` 0 when no credentials came (`SCM_CREDENTIALS`, given by the kernel because the
/// socket has `SO_PASSCRED`); `*truncated` is 1 when the datagram was longer than its buffer.
/// File descriptors a sender passed (`SCM_RIGHTS`) are closed, never kept. The CMSG_* macros are
/// what Swift cannot import; `SCM_CREDENTIALS` (2 on Linux) is declared by glibc only under
/// `_GNU_SOURCE`, so its value is written here.
static inline void cwormhole_read_credentials(struct msghdr *message, unsigned int *uid, int *pid, int *truncated) {
    *uid = (unsigned int)-1;
    *pid = 0;
    *truncated = (message->msg_flags & MSG_TRUNC) != 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(message); header != NULL; header = CMSG_NXTHDR(message, header)) {
        if (header->cmsg_level != SOL_SOCKET) continue;
        if (header->cmsg_type == 2 && header->cmsg_len >= CMSG_LEN(3 * sizeof(int))) {
            int credentials[3];  // struct ucred: pid, uid, gid
            memcpy(credentials, CMSG_DATA(header), sizeof credentials);
            *pid = credentials[0];
            *uid = (unsigned int)credentials[1];
        } else if (header->cmsg_type == SCM_RIGHTS) {
            size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t index = 0; index < count; index++) {
                int passed;
                memcpy(&passed, CMSG_DATA(header) + index * sizeof(int), sizeof passed);
                close(passed);
            }
        }
    }
}

/// Room for one datagram's ancillary data: credentials, and a few descriptors to close.
typedef union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(3 * sizeof(int)) + CMSG_SPACE(4 * sizeof(int))];
} cwormhole_control;

/// The most datagrams `cwormhole_receive_many_with_credentials` takes in one call.
#define CWORMHOLE_RECEIVE_MANY_MOST 8

/// One datagram `cwormhole_receive_many_with_credentials` received: its length and its sender's
/// credentials, as `cwormhole_read_credentials` reads them.
typedef struct {
    long count;
    unsigned int uid;
    int pid;
    int truncated;
} cwormhole_datagram;

/// Receives up to `slots` (at most CWORMHOLE_RECEIVE_MANY_MOST) queued datagrams from the
/// doorbell socket `fd` in one system call (recvmmsg(2), non-blocking): datagram i lands at
/// `buffer + i * slot_length`, what it was in `datagrams[i]`. Returns how many came (fewer than
/// `slots`: the queue was empty after them), or -1 with errno set (`EAGAIN`: none was queued).
/// recvmmsg and `struct mmsghdr` are declared only under `_GNU_SOURCE`: the system call is made
/// by number, with the kernel's layout of the structure.
static inline int cwormhole_receive_many_with_credentials(
    int fd, void *buffer, size_t slot_length, int slots, cwormhole_datagram *datagrams) {
    struct {
        struct msghdr header;
        unsigned int length;
    } messages[CWORMHOLE_RECEIVE_MANY_MOST];
    cwormhole_control controls[CWORMHOLE_RECEIVE_MANY_MOST];
    struct iovec vectors[CWORMHOLE_RECEIVE_MANY_MOST];
    if (slots > CWORMHOLE_RECEIVE_MANY_MOST) slots = CWORMHOLE_RECEIVE_MANY_MOST;
    if (slots < 1) slots = 1;
    memset(messages, 0, sizeof messages[0] * (size_t)slots);
    for (int index = 0; index < slots; index++) {
        vectors[index].iov_base = (char *)buffer + (size_t)index * slot_length;
        vectors[index].iov_len = slot_length;
        messages[index].header.msg_iov = &vectors[index];
        messages[index].header.msg_iovlen = 1;
        messages[index].header.msg_control = controls[index].bytes;
        messages[index].header.msg_controllen = sizeof controls[index].bytes;
    }
    long received = syscall(SYS_recvmmsg, fd, messages, (unsigned int)slots, MSG_DONTWAIT, NULL);
    if (received < 0) return -1;
    for (long index = 0; index < received; index++) {
        datagrams[index].count = (long)messages[index].length;
        cwormhole_read_credentials(
            &messages[index].header, &datagrams[index].uid, &datagrams[index].pid, &datagrams[index].truncated);
    }
    return (int)received;
}

/// The CPU the calling thread runs on (the doorbell's diagnostic timeline, HopTrace.swift):
/// glibc's `sched_getcpu` (read from the kernel's rseq area or the vDSO, no system call), declared
/// here because <sched.h> declares it only with `_GNU_SOURCE`.
extern int sched_getcpu(void);
static inline int cwormhole_current_cpu(void) { return sched_getcpu(); }

#endif
