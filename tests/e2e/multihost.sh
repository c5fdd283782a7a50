#!/usr/bin/env bash
# Data-parallel training across "hosts" made on this machine: each host is a network namespace with
# its own address (10.77.0.N on a bridge in a hub namespace, veth links), one rank per host, Open MPI
# started from host 1 through an rsh agent that enters the other hosts' namespaces, TCP between ranks
# (btl tcp,self: no shared memory). Cases:
#   equal     3 hosts: the losses equal one process's with the same global batch (6 streams).
#   link_cut  3 hosts; host 3's link goes down mid-run (ip link set eth0 down): rank 0 names rank 2
#             within train.dist_timeout_s plus a few seconds, the surviving ranks exit, the last
#             checkpoint loads, and the run resumes on hosts 1-2 to the losses of one process resumed
#             from the same checkpoint.
# Usage: multihost.sh BUILD_DIR SOURCE_DIR MPIRUN CASE. Exit 77 (skipped), saying why, where namespaces
# or veth links cannot be made (not root, no CAP_SYS_ADMIN/CAP_NET_ADMIN, no iproute2), or without
# Open MPI's mpirun or an MPI build.
set -uo pipefail
build=$1 src=$2 mpirun=$3 case=$4
source "$src/tests/e2e/common.sh"

if [ -z "$mpirun" ] || ! command -v "$mpirun" > /dev/null; then echo "SKIPPED: no mpirun (Debian: openmpi-bin)"; exit 77; fi
matches "MPI built" "$("$train" --device-info)" || { echo "SKIPPED: srutrain was built without MPI"; exit 77; }
matches "Open MPI|OpenRTE" "$("$mpirun" --version 2>&1)" || { echo "SKIPPED: the rsh agent used here is Open MPI's"; exit 77; }
command -v ip > /dev/null || { echo "SKIPPED: no ip command (Debian: iproute2)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIPPED: network namespaces need root"; exit 77; }

hosts=3
# A prefix no existing namespace uses (runs in parallel, or left over from a killed run); names stay
# under the 15 characters Linux allows.
existing=$(ip netns list 2> /dev/null | awk '{print $1}')
for _ in $(seq 20); do
  prefix=sru$(printf %05d $(((RANDOM * 32768 + RANDOM + $$) % 100000)))
  grep -q "^${prefix}" <<< "$existing" || break
done
ns() { echo "${prefix}h$1"; }
ours() { ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^${prefix}(h[0-9]+|hub|probe)$"; }
kill_on_hosts() { local n; for n in "$@"; do ip netns pids "$(ns "$n")" 2> /dev/null | xargs -r kill -9 2> /dev/null; done; }
cleanup() {
  for n in $(ours); do
    ip netns pids "$n" 2> /dev/null | xargs -r kill -9 2> /dev/null
    ip netns del "$n" 2> /dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
# The hub holds a bridge; host i's eth0 (10.77.0.i/24) is a veth whose other end is on the bridge.
make_hosts() {
  ip netns add "${prefix}hub" && ip -n "${prefix}hub" link set lo up && ip -n "${prefix}hub" link add br0 type bridge &&
    ip -n "${prefix}hub" link set br0 up || return 1
  local i
  for i in $(seq "$hosts"); do
    ip netns add "$(ns "$i")" && ip -n "$(ns "$i")" link set lo up &&
      ip link add "${prefix}v$i" netns "$(ns "$i")" type veth peer name "${prefix}p$i" netns "${prefix}hub" &&
      ip -n "$(ns "$i")" link set "${prefix}v$i" name eth0 && ip -n "$(ns "$i")" addr add "10.77.0.$i/24" dev eth0 &&
      ip -n "$(ns "$i")" link set eth0 up && ip -n "${prefix}hub" link set "${prefix}p$i" master br0 &&
      ip -n "${prefix}hub" link set "${prefix}p$i" up || return 1
  done
}
# Whether this machine lets us make namespaces and veth links at all (a skip), apart from a failure to
# build the hosts once it does (a failure).
if ! { ip netns add "${prefix}probe" && ip link add "${prefix}pa" netns "${prefix}probe" type veth peer name "${prefix}pb" \
         netns "${prefix}probe"; } > "$work/probe.log" 2>&1; then
  echo "SKIPPED: cannot make network namespaces and veth links here: $(tail -1 "$work/probe.log")"
  exit 77
fi
ip netns del "${prefix}probe"
make_hosts > "$work/ns.log" 2>&1 || { cat "$work/ns.log"; fail "making the hosts failed"; }
# Open MPI's rsh agent: `agent HOST COMMAND...` runs COMMAND in that host's namespace (as ssh would on
# a host of that address).
cat > "$work/agent.sh" << EOF
#!/bin/sh
host=\$1
shift
exec ip netns exec ${prefix}h\${host##*.} /bin/sh -c "\$*"
EOF
chmod +x "$work/agent.sh"

# mh N ARGS...: mpirun from host 1 with one rank on each of hosts 1..N, TCP only. rtc_hwloc_vmhole
# none: Open MPI 4.1's daemons otherwise write the hardware topology into shared memory at an address
# they pick from their own memory map, and one crashed doing so in CI (SIGSEGV in
# hwloc_shmem_topology_write); ranks on other hosts cannot share that memory anyway.
mh() {
  local n=$1 list="" i
  shift
  for i in $(seq "$n"); do list+="${list:+,}10.77.0.$i:1"; done
  timeout -k 10 300 ip netns exec "$(ns 1)" "$mpirun" --allow-run-as-root --bind-to none -np "$n" --host "$list" \
    --mca plm_rsh_agent "$work/agent.sh" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
    --mca oob_tcp_if_include 10.77.0.0/24 --mca rtc_hwloc_vmhole none "$@"
}
batch=(--set data.batch_size=6)  # 6 streams: 2 per rank on 3 hosts, 3 per rank on 2
tiny_run() { "$train" --config "$tiny" --set data.path="$data" "${batch[@]}" "$@"; }
tiny_mh() { local n=$1; shift; mh "$n" "$train" --config "$tiny" --set data.path="$data" "${batch[@]}" "$@"; }
rank_pids() { ip netns pids "$(ns "$1")"; }  # every process on host $1 (its orted and its rank)

case $case in
  equal)
    tiny_run --run-dir "$work/one" > "$work/one.log" 2>&1 || { cat "$work/one.log"; fail "1-process run failed"; }
    tiny_mh 3 --run-dir "$work/three" > "$work/three.log" 2>&1 || { tail -20 "$work/three.log"; fail "3-host run failed"; }
    same_losses "$work/one" "$work/three" || fail "3-host losses differ from the single process's"
    grep -q '"world_size": 3' "$work/three/summary.json" || fail "summary.json does not name 3 ranks"
    grep -Eq "rank 0: cpu on [^,]*, rank 1: cpu on [^,]*, rank 2: cpu on " "$work/three.log" \
      || fail "the log does not describe 3 ranks"
    echo "ok: 3 hosts over TCP (one rank each, no shared memory) follow one process's losses"
    ;;
  link_cut)
    timeout=${SRU_MULTIHOST_TIMEOUT:-3}
    tiny_mh 3 --run-dir "$work/run" --set train.max_steps=100000 --set eval.every_steps=4 --set eval.max_batches=1 \
      --set train.dist_timeout_s="$timeout" > "$work/log" 2>&1 &
    mp=$!
    for _ in $(seq 600); do [ -f "$work/run/last.safetensors" ] && break; sleep 0.1; done
    [ -f "$work/run/last.safetensors" ] || { kill_on_hosts 1 2 3; cat "$work/log"; fail "no checkpoint before the cut"; }
    sleep 1
    start=$(date +%s.%N)
    ip -n "$(ns 3)" link set eth0 down
    # Ranks 0 and 1 (hosts 1 and 2) must end; mpirun itself may wait on host 3's daemon, so it is not
    # what the bound is about.
    limit=$((timeout * 2 + 15)) ended="" named=""
    since() { python3 -c "import time; print(round(time.time() - $start, 1))"; }
    for _ in $(seq $((limit * 5))); do
      [ -z "$named" ] && grep -q "rank 0: error" "$work/log" && named=$(since)
      if ! grep -q "train" <(ip netns pids "$(ns 1)" | xargs -r -I{} cat /proc/{}/comm 2> /dev/null; \
                             ip netns pids "$(ns 2)" | xargs -r -I{} cat /proc/{}/comm 2> /dev/null); then
        ended=$(since)
        break
      fi
      sleep 0.2
    done
    kill_on_hosts 1 2 3  # mpirun (host 1) may wait on host 3's daemon; host 3's rank is cut off for good
    wait "$mp" 2> /dev/null
    grep "error" "$work/log" | head -3
    [ -n "$ended" ] || fail "ranks 0 and 1 still ran $limit s after host 3's link went down"
    grep -Eq "rank 0: error: .*(for rank\(s\) 2 \(last at #[0-9]+\), which have not reached it|: rank\(s\) 2 \(silent for [0-9]+ s\) reached it and then stopped responding)" \
      "$work/log" || fail "rank 0 did not name rank 2 (host 3)"
    step=$("$eval" --checkpoint "$work/run/last.safetensors" --split valid --max-batches 1 --json "$work/e.json" > /dev/null &&
           grep '"step"' "$work/e.json" | tr -dc 0-9)
    [ -n "$step" ] || fail "last.safetensors does not load after the cut"
    # Resume on the two hosts left, 4 more steps; the reference takes the same checkpoint the same 4
    # steps in one process. (Not one process from step 0: the cut lands anywhere up to a few hundred
    # steps in, and over that many steps 3 ranks' float32 sums drift from one process's by more than
    # the rounding the comparison allows, 3.4e-5 after 416 steps; `equal` covers the steps from 0.)
    cp -r "$work/run" "$work/ref"
    mh 2 "$train" --resume "$work/run" --set train.max_steps=$((step + 4)) > "$work/r.log" 2>&1 \
      || { tail -20 "$work/r.log"; fail "the resume on hosts 1-2 failed"; }
    "$train" --resume "$work/ref" --set train.max_steps=$((step + 4)) > "$work/ref.log" 2>&1 \
      || { cat "$work/ref.log"; fail "the one-process resume failed"; }
    [ "$(grep -c "\"step\":$((step + 4)),.*\"loss\"" "$work/run/metrics.jsonl")" -ge 1 ] \
      || fail "the resumed run did not log step $((step + 4))"
    same_losses "$work/ref" "$work/run" || fail "losses after the cut and the resume differ from one process's"
    echo "ok: host 3's link cut; rank 0 named rank 2 ${named:-?} s later and ranks 0-1 had ended at $ended s" \
      "(train.dist_timeout_s $timeout);" \
      "the step-$step checkpoint resumed on 2 hosts to the losses of one process resuming it"
    ;;
  *) fail "unknown case $case" ;;
esac
