/* An LD_PRELOAD shim that makes chosen storage operations fail with EIO (issue 16 tests).
 *
 * Counts write, pwrite, pwrite64, writev, fsync and fdatasync on file descriptors whose path
 * contains $CHARTER_EIO_MARK, but only while armed. charter_eio_arm(skip, fail) lets the
 * next `skip` matching operations through and fails the `fail` after them with EIO (-1 fails
 * every later one); charter_eio_ops() tells how many matching operations ran since arming.
 * Python calls these through ctypes (the preloaded library's symbols are global).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long armed = 0, skip_left = 0, fail_left = 0, seen = 0;

void charter_eio_arm(long skip, long fail) {
    __atomic_store_n(&seen, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&skip_left, skip, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fail_left, fail, __ATOMIC_SEQ_CST);
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
}

void charter_eio_disarm(void) { __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST); }

long charter_eio_ops(void) { return __atomic_load_n(&seen, __ATOMIC_SEQ_CST); }

static int matches(int fd) {
    const char *mark = getenv("CHARTER_EIO_MARK");
    char link[64], path[PATH_MAX];
    ssize_t n;
    if (!mark || !*mark) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return strstr(path, mark) != NULL;
}

/* 1: fail this operation with EIO; 0: let it through. */
static int should_fail(int fd) {
    if (!__atomic_load_n(&armed, __ATOMIC_SEQ_CST) || !matches(fd)) return 0;
    __atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&skip_left, __ATOMIC_SEQ_CST) > 0) {
        __atomic_sub_fetch(&skip_left, 1, __ATOMIC_SEQ_CST);
        return 0;
    }
    long left = __atomic_load_n(&fail_left, __ATOMIC_SEQ_CST);
    if (left == 0) return 0;
    if (left > 0) __atomic_sub_fetch(&fail_left, 1, __ATOMIC_SEQ_CST);
    return 1;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*sync_fn)(int);

#define REAL(name, type) \
    static type real_##name; \
    if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)
#define FAIL_IF_CHOSEN(fd) \
    if (should_fail(fd)) { errno = EIO; return -1; }

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write, write_fn);
    FAIL_IF_CHOSEN(fd)
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite, pwrite_fn);
    FAIL_IF_CHOSEN(fd)
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite64, pwrite_fn);
    FAIL_IF_CHOSEN(fd)
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(writev, writev_fn);
    FAIL_IF_CHOSEN(fd)
    return real_writev(fd, iov, iovcnt);
}

int fsync(int fd) {
    REAL(fsync, sync_fn);
    FAIL_IF_CHOSEN(fd)
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync, sync_fn);
    FAIL_IF_CHOSEN(fd)
    return real_fdatasync(fd);
}
