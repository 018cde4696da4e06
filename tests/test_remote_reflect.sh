#!/bin/sh
# No reflection, no replay: the node agent's control port admits a peer only
# by a handshake that peer made itself, with its own key (no reflection;
# core/remote/tls.h: TLS 1.3, a pre-shared key per ordered pair of agents
# whose identity names the client's address and port). An attacker in
# tests/multihost.sh hosts (a small Python relay and sniffer written into
# $tmp) goes after agent A in host 1; each case asserts that A refuses, that
# its log has a refusal naming the attacker's address, that it never logs
# "authenticated" for it, and that its --status lists no peer at that address
# as connected:
#   1. reflection from a peer's address (a peer that is down, its address
#      taken): A's --peers names host 2's address, where no agent runs; the
#      attacker listens there, and each time A dials it, opens a connection of
#      its own from host 2 to A's control port and relays the bytes both ways
#   2. reflection from A's own host (a co-tenant): A's --peers lists A's own
#      address as well (one peers file on every host); the attacker in host 2
#      takes A's dial and hands its bytes over a path socket in $tmp to a relay
#      in host 1 that connects to A's control port from A's own address
#   3. replay: a real agent B in host 2 connects to A; a sniffer in host 2
#      (AF_PACKET) captures what B's client sent to A's control port; B stops,
#      and the attacker at host 2's address sends those bytes to A again (A's
#      log read from where it stood when the replay began)
# The tree before TLS (commit d0826fc: a home-made HMAC challenge, HELLO ->
# CHALLENGE -> AUTH -> WELCOME, that bound neither end's identity) failed 1
# and 2, its agent answering its own challenge through the relay: in 2 it
# logged "agent at <its own address> authenticated" and listed host 2's
# address as a connected peer (itself); in 1 it took the proofs too, then
# spent two minutes in UCX's connect to its own worker (its UCX port admits
# --peers' addresses only, not its own) and answered nothing, --status
# included, no refusal logged. It passed 3: fresh nonces stop a replay.
# The cases need distinct host addresses: without network namespaces (not
# root, no ip(8)) they skip, as they do without the remote plugin or python3.
# TAP on stdout; every wait has a deadline. Env: B (build dir), RELAY_S
# (seconds the attacker relays, 4).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
RELAY_S=${RELAY_S:-4}
N=3
echo "1..$N"
[ -x "$PY" ] || PY=$(command -v python3)
[ -f "$B/libgoldminer-remote.so" ] || skip_all "no $B/libgoldminer-remote.so (UCX not installed: make deps)"
[ -n "$PY" ] || skip_all "no python3 (the attacker is a Python script)"

# shellcheck source=tests/multihost.sh disable=SC1091 # (followed under make lint)
. "$here/multihost.sh"
# shellcheck disable=SC2034 # multihost.sh's EXIT trap runs it
MH_ATEXIT=agent_cleanup
mh_setup 2
mh_ucx_env
if [ "$(mh_mode)" != netns ]; then
	skip_all "needs distinct host addresses, and namespaces could not be made ($(mh_why))"
fi
ip1=$(mh_addr 1) ip2=$(mh_addr 2)
echo "# hosts: $ip1 (agent A) $ip2 (the attacker; agent B in case 3)"
mh_secret "$tmp/secret"
mkdir "$tmp/root"

# The attacker. relay FROM TO SECS READY: listen at FROM (tcp:IP:PORT or
# unix:PATH) for SECS seconds, READY made once it listens; each connection
# taken is joined to a new one to TO, the bytes copied both ways at once.
# sniff IFACE SRC DST PORT OUT READY SECS: the payload of the first TCP
# connection from SRC to DST:PORT (its SYN seen), in sequence order, into OUT
# once its sender ends it (FIN, RST) or SECS pass. replay IP PORT FILE SECS:
# FILE's bytes to IP:PORT, then what comes back for SECS seconds. Each says
# what it did on stderr.
cat >"$tmp/attack.py" <<'PY'
import socket, struct, sys, threading, time

def say(*a):
    print(sys.argv[1] + ":", *a, file=sys.stderr, flush=True)

def endpoint(spec):
    kind, _, rest = spec.partition(":")
    if kind == "unix":
        return socket.AF_UNIX, rest
    ip, _, port = rest.rpartition(":")
    return socket.AF_INET, (ip, int(port))

def pump(src, dst, count, i, deadline):
    src.settimeout(0.1)
    while time.monotonic() < deadline:
        try:
            b = src.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not b:
            break
        try:
            dst.sendall(b)
        except OSError:
            break
        count[i] += len(b)
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass

def serve(a, who, to, deadline):
    fam, addr = endpoint(to)
    b = socket.socket(fam, socket.SOCK_STREAM)
    b.settimeout(2)
    try:
        b.connect(addr)
    except OSError as e:
        say("a connection from", who, "not relayed: cannot connect to", to, e)
        a.close()
        return
    me = b.getsockname() if fam == socket.AF_INET else "a path socket"
    say("a connection from", who, "relayed from", me, "to", to)
    count = [0, 0]
    ts = [threading.Thread(target=pump, args=(a, b, count, 0, deadline), daemon=True),
          threading.Thread(target=pump, args=(b, a, count, 1, deadline), daemon=True)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(max(0.1, deadline - time.monotonic() + 0.5))
    say("the connection from", who, "ended:", count[0], "bytes relayed to", to, "and",
        count[1], "back")
    a.close()
    b.close()

def relay(frm, to, secs, ready):
    fam, addr = endpoint(frm)
    ls = socket.socket(fam, socket.SOCK_STREAM)
    if fam == socket.AF_INET:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(addr)
    ls.listen(16)
    ls.settimeout(0.05)
    open(ready, "w").close()
    deadline = time.monotonic() + float(secs)
    ts = []
    while time.monotonic() < deadline:
        try:
            a, who = ls.accept()
        except socket.timeout:
            continue
        t = threading.Thread(target=serve, args=(a, who or "a path socket", to, deadline),
                             daemon=True)
        t.start()
        ts.append(t)
    ls.close()
    for t in ts:
        t.join(1.5)

def sniff(iface, src, dst, port, out, ready, secs):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
    s.bind((iface, 0))
    s.settimeout(0.05)
    open(ready, "w").close()
    src, dst, port = socket.inet_aton(src), socket.inet_aton(dst), int(port)
    flow, isn, segs, end = None, 0, {}, "no FIN or RST within %s s" % secs
    deadline = time.monotonic() + float(secs)
    while time.monotonic() < deadline:
        try:
            p = s.recv(262144)
        except socket.timeout:
            continue
        if len(p) < 34 or p[12:14] != b"\x08\x00":
            continue
        ip = p[14:]
        if ip[9] != 6 or ip[12:16] != src or ip[16:20] != dst:
            continue
        tot = struct.unpack("!H", ip[2:4])[0] or len(ip)
        tcp = ip[(ip[0] & 15) * 4:tot]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        flags = tcp[13]
        if dport != port or (flow is not None and sport != flow):
            continue
        if flow is None:
            if flags & 0x12 == 0x02:  # SYN, not SYN-ACK
                flow, isn = sport, (seq + 1) & 0xFFFFFFFF
            continue
        data = tcp[(tcp[12] >> 4) * 4:]
        if len(data) > len(segs.get(seq, b"")):
            segs[seq] = data
        if flags & 0x05:
            end = "ended by %s" % ("FIN" if flags & 1 else "RST")
            break
    buf = bytearray()
    for seq in sorted(segs, key=lambda q: (q - isn) & 0xFFFFFFFF):
        rel = (seq - isn) & 0xFFFFFFFF
        if rel > len(buf):
            break  # a gap: what follows it is not the stream
        buf += segs[seq][len(buf) - rel:]
    open(out, "wb").write(bytes(buf))
    say("the connection from port", flow, "to port", port, end + ":", len(buf), "bytes in",
        len(segs), "segments, starting", bytes(buf[:8]).hex())

def replay(ip, port, path, secs):
    data = open(path, "rb").read()
    c = socket.create_connection((ip, int(port)), timeout=2)
    c.sendall(data)
    say("sent", len(data), "bytes from", c.getsockname(), "to", (ip, int(port)))
    c.settimeout(0.1)
    got, why = 0, "still open after %s s" % secs
    deadline = time.monotonic() + float(secs)
    while time.monotonic() < deadline:
        try:
            b = c.recv(65536)
        except socket.timeout:
            continue
        except OSError as e:
            why = "reset (%s)" % e
            break
        if not b:
            why = "closed by the agent"
            break
        got += len(b)
    say("got", got, "bytes back; the connection was", why)
    c.close()

{"relay": relay, "sniff": sniff, "replay": replay}[sys.argv[1]](*sys.argv[2:])
PY

port=$((20000 + $$ % 20000))
# agent_a CASE PEERS: agent A in host 1 on port+CASE*10+1, log $tmp/aCASE.log
agent_a() {
	mh_agent 1 0 "$tmp/a$1.sock" --cpus 1 --listen "$ip1:$((port + $1 * 10 + 1))" \
		--peers "$2" --secret "$tmp/secret" --lend-root "$tmp/root" >"$tmp/a$1.log" 2>&1 ||
		echo "# agent A did not start: $(tail -3 "$tmp/a$1.log")"
}
# ready FILE: wait (5 s at most) until an attacker's process made FILE
ready() { until_ok 5 test -e "$1"; }
# ended PID S: wait (S seconds at most) until PID exits; reaped
gone() { ! mh_alive "$1"; }
ended() {
	until_ok "$2" gone "$1"
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}
# re IP: IP with its dots as a regular expression's
re() { echo "$1" | sed 's/\./\\./g'; }
# since LOG OFF: LOG from byte OFF on
since() { tail -c +$(($2 + 1)) "$1"; }
# verdict LOG OFF IP WORDS: wait (8 s at most, less once A logged that it
# authenticated the address) for A's refusal naming IP with WORDS (an ERE) in
# LOG from byte OFF on; then 0 if it is there and no "agent at IP
# authenticated" is
verdict() {
	v_re="refused (a connection from )?$(re "$3")[: ]$4"
	until_ok 8 decided "$@"
	since "$1" "$2" | grep -Eq "$v_re" && ! since "$1" "$2" | grep -Fq "at $3 authenticated"
}
# decided LOG OFF IP: A refused (v_re) or authenticated IP, in LOG from OFF on
decided() { since "$1" "$2" | grep -Eq "$v_re" || since "$1" "$2" | grep -Fq "at $3 authenticated"; }
# unconnected CASE IP...: A answers --status (within 5 s: an agent stuck in
# a call does not) and lists no peer at any IP as connected; else 1, saying
# which
unconnected() {
	u_case=$1
	shift
	timeout 5 "$G" node --socket "$tmp/a$u_case.sock" --status >"$tmp/status" 2>&1
	if ! grep -q '"peers": ' "$tmp/status"; then
		echo "# A did not answer --status within 5 s: $(head -c 200 "$tmp/status")"
		return 1
	fi
	for u_ip in "$@"; do
		if grep -o '"addr": "[^"]*", "state": "connected"' "$tmp/status" |
			grep -Fq "\"$u_ip:"; then
			echo "# A's --status lists $u_ip as connected"
			return 1
		fi
	done
}
# show FILE ERE: FILE's lines that match ERE, as diagnostics
show() { grep -E "$2" "$1" | head -12 | sed 's/^/# /'; }

# 1: reflection from a peer's address
s0=$(date +%s%N)
pa=$((port + 11)) p2=$((port + 12))
mh_spawn 2 0 "$PY" "$tmp/attack.py" relay "tcp:$ip2:$p2" "tcp:$ip1:$pa" "$RELAY_S" "$tmp/r1.ready" \
	>"$tmp/r1.log" 2>&1
r1=$MH_PID
ready "$tmp/r1.ready" || echo "# the relay did not start: $(cat "$tmp/r1.log")"
agent_a 1 "$ip2:$p2"
ok=1
verdict "$tmp/a1.log" 0 "$ip2" ".*identity" && ok=0
ended "$r1" $((RELAY_S + 3))
grep -Fq "at $ip2 authenticated" "$tmp/a1.log" && ok=1
unconnected 1 "$ip2" || ok=1
grep -q 'relayed from' "$tmp/r1.log" || ok=1 # (else no reflection was tried)
show "$tmp/r1.log" relay
show "$tmp/a1.log" "$(re "$ip2")"
mh_agents_stop
t $ok "a reflection of A's dial to a peer's address ($ip2) is refused, the refusal naming $ip2; never authenticated, not connected ($((($(date +%s%N) - s0) / 1000000)) ms)"

# 2: reflection from A's own host
s0=$(date +%s%N)
pa=$((port + 21)) p2=$((port + 22))
mh_spawn 1 0 "$PY" "$tmp/attack.py" relay "unix:$tmp/own.sock" "tcp:$ip1:$pa" "$((RELAY_S + 1))" \
	"$tmp/r2a.ready" >"$tmp/r2a.log" 2>&1
r2a=$MH_PID
ready "$tmp/r2a.ready" || echo "# host 1's relay did not start: $(cat "$tmp/r2a.log")"
mh_spawn 2 0 "$PY" "$tmp/attack.py" relay "tcp:$ip2:$p2" "unix:$tmp/own.sock" "$RELAY_S" \
	"$tmp/r2b.ready" >"$tmp/r2b.log" 2>&1
r2b=$MH_PID
ready "$tmp/r2b.ready" || echo "# host 2's relay did not start: $(cat "$tmp/r2b.log")"
agent_a 2 "$ip1:$pa,$ip2:$p2"
ok=1
verdict "$tmp/a2.log" 0 "$ip1" ".*this agent's own" && ok=0
ended "$r2b" $((RELAY_S + 3))
ended "$r2a" 3
grep -Fq "at $ip1 authenticated" "$tmp/a2.log" && ok=1
grep -Fq "at $ip2 authenticated" "$tmp/a2.log" && ok=1
unconnected 2 "$ip1" "$ip2" || ok=1
grep -Fq "relayed from ('$ip1'" "$tmp/r2a.log" || ok=1 # from A's own address
show "$tmp/r2b.log" relay
show "$tmp/r2a.log" relay
show "$tmp/a2.log" "$(re "$ip1")|$(re "$ip2")"
mh_agents_stop
t $ok "a reflection of A's dial, relayed back from A's own address ($ip1), is refused as A's own handshake, the refusal naming $ip1; never authenticated, not connected ($((($(date +%s%N) - s0) / 1000000)) ms)"

# 3: replay of a captured handshake
s0=$(date +%s%N)
pa=$((port + 31)) pb=$((port + 32))
agent_a 3 "$ip2:$pb"
mh_spawn 2 0 "$PY" "$tmp/attack.py" sniff gm0 "$ip2" "$ip1" "$pa" "$tmp/hs.bin" "$tmp/s3.ready" 10 \
	>"$tmp/s3.log" 2>&1
s3=$MH_PID
ready "$tmp/s3.ready" || echo "# the sniffer did not start: $(cat "$tmp/s3.log")"
mh_spawn 2 0 "$G" node --socket "$tmp/b3.sock" --cpus 1 --listen "$ip2:$pb" --peers "$ip1:$pa" \
	--secret "$tmp/secret" --lend-root "$tmp/root" >"$tmp/b3.log" 2>&1
bpid=$MH_PID # (stopped on its own: not one of mh_agents_stop's)
ok=1
mh_connected "$tmp/a3.sock" 1 && ok=0
[ $ok = 0 ] || echo "# B did not connect to A within 10 s"
ended "$s3" 11
kill "$bpid" 2>/dev/null
ended "$bpid" 3
until_ok 10 unconnected 3 "$ip2" >/dev/null # A sees B gone (no longer "connected")
off=$(wc -c <"$tmp/a3.log")
[ -s "$tmp/hs.bin" ] || { ok=1; echo "# nothing captured: $(cat "$tmp/s3.log")"; }
mh_run 2 0 "$PY" "$tmp/attack.py" replay "$ip1" "$pa" "$tmp/hs.bin" 3 >"$tmp/p3.log" 2>&1
verdict "$tmp/a3.log" "$off" "$ip2" "" || ok=1
since "$tmp/a3.log" "$off" >"$tmp/a3.after"
grep -Fq "at $ip2 authenticated" "$tmp/a3.after" && ok=1
unconnected 3 "$ip2" || ok=1
grep -F "at $ip2 authenticated" "$tmp/a3.log" | head -1 | sed 's/^/# before: /'
cat "$tmp/s3.log" "$tmp/p3.log" | sed 's/^/# /'
show "$tmp/a3.after" "$(re "$ip2")"
mh_agents_stop
t $ok "a replay from $ip2 of the bytes B's client sent A is refused, the refusal naming $ip2; no new \"authenticated\", not connected ($((($(date +%s%N) - s0) / 1000000)) ms)"
