/*
 * accept_guard.c - accept(2) and accept4(2) of the goldminer program, for the
 * remote plugin's guard on UCX's listening sockets where the kernel refuses a
 * socket filter (SO_ATTACH_FILTER wants CAP_NET_ADMIN on some kernels: an
 * agent run as an ordinary user).
 *
 * The idea: UCX's TCP transport accepts its connections itself, with
 * accept(2) from libc. This program defines accept and accept4 (exported:
 * the Makefile's --export-dynamic-symbol), so the dynamic linker resolves
 * UCX's calls here first; each calls libc's and then asks gm_accept_hook,
 * when the plugin has set it (core/remote/conn.c), whether the new
 * connection may stay. One that may not is closed before its accepter reads
 * a byte of it, and the next pending one is taken instead (a non-blocking
 * listener then answers EAGAIN, as with no connection at all). Written by
 * hand: no library filters another library's accept.
 *
 * Not here: which listening sockets are UCX's and which addresses are
 * admitted (the hook's), the socket filter itself (core/remote/ctl.c). A
 * program other than this one (a test binary) has no such accept: the plugin
 * finds no gm_accept_hook there and does not claim this guard.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The plugin's check: non-zero when the connection accepted on lfd from sa
 * may stay. NULL: every connection stays. */
int (*gm_accept_hook)(int lfd, const struct sockaddr *sa, socklen_t len);

typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

int accept4(int lfd, struct sockaddr *addr, socklen_t *len, int flags)
{
	static accept4_fn real;
	if (!real)
		real = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = real(lfd, (struct sockaddr *)&ss, &sl, flags);
		if (fd >= 0 && gm_accept_hook && !gm_accept_hook(lfd, (struct sockaddr *)&ss, sl)) {
			close(fd); /* refused before a byte of it was read */
			continue;
		}
		if (fd >= 0 && addr && len) {
			memcpy(addr, &ss, sl < *len ? sl : *len);
			*len = sl;
		}
		return fd;
	}
}

int accept(int lfd, struct sockaddr *addr, socklen_t *len)
{
	return accept4(lfd, addr, len, 0);
}
