# The namespace fleet the fleet-*.sh and latency-across-hosts.sh scripts measure on, sourced by
# them after they set $p (a name prefix), $ctl, $sw and $hosts: three SSH "hosts" made of network
# namespaces (h1, h2, h3), each with a real sshd, a controller namespace with a management link
# to each (10.210.1.2, 10.210.2.2, 10.210.4.2), and a data network on a bridge in a namespace of
# its own (2-queue veths; data addresses 10.210.3.1, .2, .13). Sets $dir (keys, ssh config) and
# a trap that removes everything on exit.
dir=$(mktemp -d)
cleanup() {
  for ns in $ctl "${hosts[@]}" $sw; do
    for pid in $(ip netns pids $ns 2>/dev/null); do kill -9 $pid 2>/dev/null || true; done
    ip netns del $ns 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
for ns in $ctl "${hosts[@]}" $sw; do ip netns add $ns; ip -n $ns link set lo up; done
ip -n $sw link add br0 type bridge; ip -n $sw link set br0 up
# host i: management 10.210.M.2 (M = 1, 2, 4), data 10.210.3.D (D = 1, 2, 13)
mgmt=(1 2 4); data=(1 2 13)
for i in 0 1 2; do
  h=${hosts[$i]}; n=$((i + 1))
  ip link add c$n netns $ctl type veth peer m0 netns $h
  ip link add d0 numtxqueues 2 numrxqueues 2 netns $h type veth peer p$n numtxqueues 2 numrxqueues 2 netns $sw
  ip -n $sw link set p$n master br0 up
  ip -n $ctl addr add 10.210.${mgmt[$i]}.1/24 dev c$n; ip -n $ctl link set c$n up
  ip -n $h addr add 10.210.${mgmt[$i]}.2/24 dev m0; ip -n $h link set m0 up
  ip -n $h addr add 10.210.3.${data[$i]}/24 dev d0; ip -n $h link set d0 up
done
for k in hostkey id; do ssh-keygen -q -t ed25519 -N '' -f "$dir/$k"; done
cp "$dir/id.pub" "$dir/authorized_keys"
printf 'HostKey %s/hostkey\nAuthorizedKeysFile %s/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n' "$dir" "$dir" > "$dir/sshd_config"
printf 'Host *\n  IdentityFile %s/id\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n' "$dir" > "$dir/config"
mkdir -p /run/sshd
for h in "${hosts[@]}"; do ip netns exec $h /usr/sbin/sshd -f "$dir/sshd_config"; done
sleep 1
