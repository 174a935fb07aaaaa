#!/usr/bin/env bash
# Starts the server on a free port and talks to it with redis-cli and redis-benchmark.
set -euo pipefail
bin=${1:-target/release/tidecache-server}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# No snapshot schedule: SHUTDOWN below would otherwise leave a dump.rdb in this directory.
"$bin" --port "$port" --loglevel warning --save "" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
passed=0; failed=0
check() { # name expected actual
  if [ "$2" == "$3" ]; then passed=$((passed+1)); else failed=$((failed+1)); echo "FAIL $1: expected [$2] got [$3]"; fi
}
check "ping" "PONG" "$(redis-cli -p "$port" ping)"
check "resp3 hello" "3" "$(redis-cli -3 -p "$port" hello 3 | sed -n 's/^5) "proto"$//p;/proto/{n;p}' | tr -dc 0-9)"
check "resp3 ping" "PONG" "$(redis-cli -3 -p "$port" ping)"
check "inline ping" "+PONG" "$(printf 'PING\r\n' | timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; head -c 5 <&3")"
check "benchmark" "0" "$(redis-benchmark -p "$port" -t ping_inline,ping_mbulk -n 20000 -q >/dev/null 2>&1; echo $?)"
check "set/get benchmark" "0" "$(redis-benchmark -p "$port" -t set,get -n 20000 -r 1000 -q >/dev/null 2>&1; echo $?)"
check "set then get" "v" "$(redis-cli -p "$port" set smoke:k v ex 100 >/dev/null; redis-cli -p "$port" get smoke:k)"
check "docs for doc.find" "1" "$(redis-cli -p "$port" command docs doc.find | grep -c '^summary$' || true)"
redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
code=0; wait $pid || code=$?
check "shutdown exit code" "0" "$code"
trap - EXIT
echo "smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
