#!/usr/bin/env bash
# transfer_pair across two network namespaces joined by a veth pair, so the KV bytes cross a real
# network stack (veth + TCP) instead of loopback: the prefill process runs in namespace A
# (10.77.0.1), the decode process in namespace B (10.77.0.2), UCX over TCP on the veth ends only.
#   usage: netns.sh path/to/transfer_pair
# Exits 77 (ctest: skipped) where namespaces cannot be created (not root, no CAP_SYS_ADMIN, no ip).
set -uo pipefail
BIN=${1:?usage: netns.sh path/to/transfer_pair}
skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip >/dev/null || skip "ip (iproute2) not found"
[ "$(id -u)" -eq 0 ] || skip "not root: cannot create network namespaces"
A=kvcxa$$; B=kvcxb$$; VA=kvxa$$; VB=kvxb$$
DIR=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
ip netns add "$A" 2>/dev/null || skip "ip netns add failed (no CAP_SYS_ADMIN, or namespaces disabled)"
ip netns add "$B" || skip "ip netns add failed"
ip link add "$VA" type veth peer name "$VB" || skip "cannot create a veth pair"
ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" || skip "cannot move the veth ends"
ip -n "$A" addr add 10.77.0.1/24 dev "$VA" && ip -n "$B" addr add 10.77.0.2/24 dev "$VB" || exit 1
ip -n "$A" link set lo up; ip -n "$B" link set lo up
ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up || exit 1
echo "namespaces $A (10.77.0.1 on $VA) and $B (10.77.0.2 on $VB)"

DESC="$DIR/desc"
ip netns exec "$A" "$BIN" --role prefill --desc "$DESC" --transports tcp --net-devices "$VA" --tokens 1000 &
PREFILL=$!
ip netns exec "$B" "$BIN" --role decode --desc "$DESC" --transports tcp --net-devices "$VB" --tokens 1000
RC=$?
wait "$PREFILL"; PRC=$?
# The bytes crossed the veth pair: its counters saw at least the imported KV.
RX=$(ip netns exec "$B" cat /sys/class/net/"$VB"/statistics/rx_bytes)
echo "veth $VB received $RX bytes"
[ "$RC" -eq 0 ] && [ "$PRC" -eq 0 ] || { echo "FAILED (decode $RC, prefill $PRC)"; exit 1; }
[ "$RX" -gt 100000 ] || { echo "FAILED: too few bytes crossed the veth pair"; exit 1; }
echo "ok"
