#!/bin/sh
# Agents that authenticate each other by an operator's certificates instead of
# the group secret (`goldminer node --tls-cert FILE --tls-key FILE --tls-ca
# FILE`; core/remote/tls.h), in two tests/multihost.sh hosts, with a small PKI
# made here by openssl(1): a CA, one certificate per agent naming its address,
# and a certificate of another CA.
#   1. two agents with certificates: each names the other connected; a job in
#      host 1 gets the same per-epoch checksums as a single-host run, and the
#      peer's remote workers (which still present their session's pre-shared
#      key, not a certificate) delivered samples
#   2. an agent with a certificate of another CA is refused, the refusal naming
#      its address and why; it is never listed as connected
#   3. an agent with the secret and one with a certificate refuse each other in
#      words that say to give every agent the same kind
#   4. an agent whose certificate names another address (host 1's, presented
#      from host 2) is refused, naming both
#   5. bad options are refused at start in words naming the file: two of the
#      three options, --secret with them, a key others can read, a key that is
#      not the certificate's, a certificate that does not chain to --tls-ca
# Without the remote plugin or openssl(1) every case skips, saying why. TAP on
# stdout; every wait has a deadline. Env: B (build dir).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/agent.sh
. "$here/agent.sh"
N=5
echo "1..$N"
[ -f "$B/libgoldminer-remote.so" ] || skip_all "no $B/libgoldminer-remote.so (UCX not installed: make deps)"
command -v openssl >/dev/null 2>&1 || skip_all "no openssl(1) to make certificates (apt-get install openssl)"

# shellcheck source=tests/multihost.sh
. "$here/multihost.sh"
MH_ATEXIT=agent_cleanup
mh_setup 2
mh_ucx_env
a1=$(mh_addr 1)
a2=$(mh_addr 2)
echo "# multihost mode: $(mh_mode), hosts: $a1 $a2"

# ca NAME: a CA; cert NAME CA SAN: a key and a certificate signed by CA
ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=$1" -keyout "$tmp/$1.key" -out "$tmp/$1.crt" 2>>"$tmp/openssl.err"
}
cert() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$tmp/$1.key" -out "$tmp/$1.csr" 2>>"$tmp/openssl.err" &&
		printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\n' "$3" >"$tmp/$1.ext" &&
		openssl x509 -req -in "$tmp/$1.csr" -CA "$tmp/$2.crt" -CAkey "$tmp/$2.key" \
			-CAcreateserial -days 2 -extfile "$tmp/$1.ext" -out "$tmp/$1.crt" 2>>"$tmp/openssl.err"
	chmod 600 "$tmp/$1.key"
}
if ! { ca ca && ca ca2 && cert one ca "IP:$a1" && cert two ca "IP:$a2" && cert alien ca2 "IP:$a2"; }; then
	diag "$tmp/openssl.err"
	skip_all "openssl(1) could not make the test PKI"
fi
cat "$tmp/ca.crt" "$tmp/ca2.crt" >"$tmp/both.crt"
mh_secret "$tmp/secret"

"$G" synth "$tmp/data" --images 256 >/dev/null 2>&1
BENCH="--batch 32 --size 96 --checksum --quiet"
# six epochs (a second or two of work at the home's half core): long enough for
# the peer's worker, which starts once the job asks, to deliver on a loaded machine
EP=6
# shellcheck disable=SC2086 # BENCH is a list of options
ref=$("$G" bench "$tmp/data" --workers 2 --epochs $EP $BENCH 2>/dev/null |
	sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p')

port=$((21000 + $$ % 20000))
# agent I AUTH...: a node agent in host I (socket $tmp/I.sock, log $tmp/I.log)
# listening at its address, the other host its peer, authenticated by AUTH
agent() {
	i=$1
	shift
	o=$((3 - i))
	# the home (1) at half a core: one local worker there covers less than the
	# greedy job takes, so it asks the peer at its first measurement (at a
	# whole core its worker covered the demand in some runs: no ask, and the
	# peer's workers never ran)
	mh_agent "$i" 0 "$tmp/$i.sock" --cpus "$([ "$i" = 1 ] && echo 0.5 || echo 1)" \
		--listen "$(mh_addr "$i"):$((port + i))" --peers "$(mh_addr "$o"):$((port + o))" \
		--lend-root "$tmp/data" "$@" >"$tmp/$i.log" 2>&1 ||
		echo "# agent $i did not start: $(tail -3 "$tmp/$i.log")"
}
certs() { echo "--tls-cert $tmp/$1.crt --tls-key $tmp/$1.key --tls-ca $tmp/${2:-ca}.crt"; }
stop() { # every agent stopped; the next pair on ports of their own
	mh_agents_stop
	port=$((port + 10))
}

# 1: both with certificates
# shellcheck disable=SC2046 # certs prints options
agent 2 $(certs two)
# shellcheck disable=SC2046
agent 1 $(certs one)
wait_for "$tmp/1.log" "agent at $a2 authenticated"
wait_for "$tmp/2.log" "agent at $a1 authenticated"
mh_connected "$tmp/1.sock" 1 || echo "# agent 1 saw no peer connected within 10 s"
# the job again (3 runs at most) when it ended before the peer's worker, which
# starts as the job asks, delivered a sample (a short job on a loaded machine)
try=0 d=0
while [ $try -lt 3 ] && [ "${d:-0}" = 0 ]; do
	try=$((try + 1))
	# shellcheck disable=SC2086
	mh_run 1 0.25 timeout 300 "$G" bench "$tmp/data" --node "$tmp/1.sock" --epochs $EP $BENCH \
		>"$tmp/run.json" 2>"$tmp/run.err"
	sum=$(sed -n 's/.*"checksum": \[\([^]]*\)\].*/\1/p' "$tmp/run.json")
	# the agent says what the job's remote workers delivered once it sees it gone
	d=$(mh_delivered "$tmp/1.log" $try)
	[ "$sum" = "$ref" ] || break
done
ok=1
[ -n "$ref" ] && [ "$sum" = "$ref" ] && [ "${d:-0}" -gt 0 ] && grep -q "by certificates" "$tmp/1.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; diag "$tmp/run.err"; echo "# $sum want $ref"; }
t $ok "certificates: agents authenticated, same checksums, the peer's workers delivered ${d:-0} samples"
stop

# 2: a certificate of another CA (it trusts ours: only host 1 can refuse it)
# shellcheck disable=SC2046
agent 1 $(certs one)
# shellcheck disable=SC2046
agent 2 $(certs alien both)
wait_for "$tmp/1.log" "refused $a2: its certificate does not verify against --tls-ca"
r=$?
ok=1
[ $r = 0 ] && [ "$(mh_peers "$tmp/1.sock")" = 0 ] && ! grep -q "agent at $a2 authenticated" "$tmp/1.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; }
t $ok "a certificate of another CA: refused, naming $a2 and why"
stop

# 3: the secret against a certificate, both ways
# shellcheck disable=SC2046
agent 1 $(certs one)
agent 2 --secret "$tmp/secret"
wait_for "$tmp/1.log" "takes agents by certificate (--tls-cert): give every agent the same kind"
r1=$?
wait_for "$tmp/2.log" "or one with --tls-cert (this agent uses --secret: give every agent the same kind)"
r2=$?
ok=1
[ $r1 = 0 ] && [ $r2 = 0 ] && [ "$(mh_peers "$tmp/1.sock")" = 0 ] && [ "$(mh_peers "$tmp/2.sock")" = 0 ] && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; }
t $ok "a secret and a certificate: each refuses the other in words"
stop

# 4: host 1's own certificate presented from host 2 (it names $a1, not $a2)
# shellcheck disable=SC2046
agent 1 $(certs one)
# shellcheck disable=SC2046
agent 2 $(certs one)
wait_for "$tmp/1.log" "names neither $a2 nor\|this agent's own"
r=$?
ok=1
[ $r = 0 ] && [ "$(mh_peers "$tmp/1.sock")" = 0 ] && ! grep -q "agent at $a2 authenticated" "$tmp/1.log" && ok=0
[ $ok = 0 ] || { diag "$tmp/1.log"; diag "$tmp/2.log"; }
t $ok "a certificate that is not the peer's: refused, naming $a2"
stop

# 5: bad options at start, in words naming the file
cp "$tmp/one.key" "$tmp/loose.key"
chmod 644 "$tmp/loose.key"
L="--listen 127.0.0.1:0 --peers 127.0.0.1:1 --socket $tmp/x.sock"
ok=0
bad() { # bad WORDS OPTIONS...: the agent exits non-zero within 10 s, saying WORDS
	w=$1
	shift
	# shellcheck disable=SC2086
	env UCX_NET_DEVICES=all timeout 10 "$G" node $L "$@" >"$tmp/bad.out" 2>&1
	rc=$?
	if [ $rc = 0 ] || [ $rc = 124 ] || ! grep -q -- "$w" "$tmp/bad.out"; then
		echo "# $* -> rc $rc:"
		diag "$tmp/bad.out"
		ok=1
	fi
}
bad "go together" --tls-cert "$tmp/one.crt" --tls-key "$tmp/one.key"
# shellcheck disable=SC2046 # certs prints options
bad "give one" --secret "$tmp/secret" $(certs one)
bad "loose.key: readable or writable by every user" --tls-cert "$tmp/one.crt" --tls-key "$tmp/loose.key" --tls-ca "$tmp/ca.crt"
bad "not the key of --tls-cert $tmp/one.crt" --tls-cert "$tmp/one.crt" --tls-key "$tmp/two.key" --tls-ca "$tmp/ca.crt"
# shellcheck disable=SC2046
bad "one.crt does not verify against --tls-ca $tmp/ca2.crt" $(certs one ca2)
bad "tls-ca $tmp/one.key" --tls-cert "$tmp/one.crt" --tls-key "$tmp/one.key" --tls-ca "$tmp/one.key"
t $ok "bad certificate options: refused at start, naming the file"
