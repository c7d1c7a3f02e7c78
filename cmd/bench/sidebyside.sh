#!/bin/bash
# sidebyside.sh -- capture builds against the peers and the do-nothing
# ceilings, back to back in one run, with the same clients: the figures
# README's "Against the peers" quotes.
#
#   cmd/bench/sidebyside.sh webhook|smtp|disk [trials]
#
# Environment (defaults in brackets):
#   CAPTURE   label=binary pairs, space-separated  [capture=./capture]
#   BENCH     the shared load tools' source dir     [../shared/bench]
#   TOOLS     where nullhttp, nullsmtp and smtpload are built   [/tmp/sidebyside]
#   MAILPIT, WEBHOOK_TESTER   the peers peers.sh builds  [/tmp/peers/...]
#   MSGS      SMTP messages per capture trial (the peer gets a quarter)  [20000]
#   DISKMSGS  messages of the disk run               [200000]
#
# Each line: the load's own summary, the server's CPU time per capture
# (user + system, from /proc: steadier than the rate on a shared
# machine) and its peak RSS (VmHWM). Every server runs in a new temp dir on
# loopback ports picked at random above 20000, and is stopped by its PID.
set -uo pipefail

CAPTURE=${CAPTURE:-capture=./capture}
BENCH=${BENCH:-../shared/bench}
TOOLS=${TOOLS:-/tmp/sidebyside}
MAILPIT=${MAILPIT:-/tmp/peers/mailpit/mailpit}
WEBHOOK_TESTER=${WEBHOOK_TESTER:-/tmp/peers/webhook-tester/webhook-tester}
MSGS=${MSGS:-20000}
DISKMSGS=${DISKMSGS:-200000}
MODE=${1:?usage: sidebyside.sh webhook|smtp|disk [trials]}
TRIALS=${2:-3}
PORT=$((20000 + RANDOM % 20000))
WORK=$(mktemp -d /tmp/sidebyside-run.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

mkdir -p "$TOOLS"
for t in nullhttp nullsmtp smtpload; do
	[ -x "$TOOLS/$t" ] || (cd "$BENCH/$t" && go build -o "$TOOLS/$t" .) || exit 1
done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }     # CPU time in 10 ms ticks
hwm() { awk '/VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$1/status"; }
per() { awk -v t="$1" -v n="$2" 'BEGIN {printf "%.1f µs", t * 10000 / n}'; } # ticks, captures
count() { awk '/^wrk:/ {print int($2 * 10)} /^smtp:/ {print $2}'; }          # captures in a run's summary
stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
next_port() { PORT=$((PORT + 10)); }

# start_capture BINARY: serve in a new data dir; sets PID, DIR, CAPTURE_URL, INBOX, PASS, STARTTLS.
start_capture() {
	next_port
	DIR=$WORK/capture.$PORT
	"$1" serve --data-dir "$DIR" --log-level warn --http 127.0.0.1:$PORT --capture 127.0.0.1:$((PORT + 1)) \
		--smtp-starttls 127.0.0.1:$((PORT + 2)) --smtp-tls 127.0.0.1:$((PORT + 3)) --email-api 127.0.0.1:$((PORT + 4)) \
		>"$DIR.out" 2>&1 &
	PID=$!
	PIDS+=("$PID")
	for _ in $(seq 100); do grep -q "CA certificate" "$DIR.out" 2>/dev/null && break; sleep 0.1; done
	CAPTURE_URL=$(awk '/Capture URL/ {print $3}' "$DIR.out")
	INBOX=$(awk '$1 == "Inbox" {print $2}' "$DIR.out")
	PASS=$(awk '/SMTP password/ {print $3}' "$DIR.out")
	STARTTLS=127.0.0.1:$((PORT + 2))
	# The free plan keeps 10,000 captures; the disk run stores 200,000.
	"$1" project set-plan default team --data-dir "$DIR" >/dev/null
}

start_mailpit() { # sets PID, DIR, SMTP_ADDR
	next_port
	DIR=$WORK/mailpit.$PORT
	mkdir -p "$DIR"
	[ -f "$WORK/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-keyout "$WORK/key.pem" -out "$WORK/cert.pem" -subj /CN=127.0.0.1 \
		-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
	"$MAILPIT" --database "$DIR/mailpit.db" --smtp 127.0.0.1:$PORT --listen 127.0.0.1:$((PORT + 1)) \
		--smtp-auth-accept-any --smtp-disable-rdns --disable-version-check --max 0 \
		--smtp-tls-cert "$WORK/cert.pem" --smtp-tls-key "$WORK/key.pem" --smtp-require-starttls >"$DIR.out" 2>&1 &
	PID=$!
	PIDS+=("$PID")
	wait_port $PORT
	SMTP_ADDR=127.0.0.1:$PORT
}

# measure NAME PID CMD...: run the load CMD against PID and print one line.
measure() {
	local name=$1 pid=$2
	shift 2
	local t0 out n
	t0=$(ticks "$pid")
	out=$("$@" 2>&1 | tail -1)
	n=$(echo "$out" | count)
	echo "$name: $out | server CPU $(per $(($(ticks "$pid") - t0)) "${n:-1}") per capture | peak RSS $(hwm "$pid")"
}

webhook() {
	local lua=$BENCH/post1k.lua label bin
	for pair in $CAPTURE; do
		label=${pair%%=*} bin=${pair#*=}
		start_capture "$bin"
		measure "$label" $PID wrk -t2 -c64 -d10s -s "$lua" "$CAPTURE_URL/bench"
		stop $PID
	done
	next_port
	"$WEBHOOK_TESTER" --log-level=warn start --addr 127.0.0.1 --port $PORT >/dev/null 2>&1 &
	PID=$!
	PIDS+=("$PID")
	wait_port $PORT
	local uuid
	uuid=$(curl -s -X POST http://127.0.0.1:$PORT/api/session -H 'Content-Type: application/json' \
		-d '{"status_code":200,"headers":[],"delay":0,"response_body_base64":""}' | sed -n 's/.*"uuid":"\([^"]*\)".*/\1/p')
	measure webhook-tester $PID wrk -t2 -c64 -d10s -s "$lua" "http://127.0.0.1:$PORT/$uuid/bench"
	stop $PID
	next_port
	"$TOOLS/nullhttp" -addr 127.0.0.1:$PORT >/dev/null 2>&1 &
	PID=$!
	PIDS+=("$PID")
	wait_port $PORT
	measure nullhttp $PID wrk -t2 -c64 -d10s -s "$lua" "http://127.0.0.1:$PORT/hook"
	stop $PID
}

smtp() {
	local label bin
	for pair in $CAPTURE; do
		label=${pair%%=*} bin=${pair#*=}
		start_capture "$bin"
		measure "$label" $PID "$TOOLS/smtpload" -addr "$STARTTLS" -mode starttls -user "$INBOX" -pass "$PASS" \
			-ca "$DIR/tls/ca.pem" -conns 8 -msgs "$MSGS" -size 2048
		stop $PID
	done
	start_mailpit
	measure mailpit $PID "$TOOLS/smtpload" -addr "$SMTP_ADDR" -mode starttls -user u -pass p -ca "$WORK/cert.pem" \
		-conns 8 -msgs $((MSGS / 4)) -size 2048
	stop $PID
	next_port
	"$TOOLS/nullsmtp" -addr 127.0.0.1:$PORT -certout "$WORK/null-ca.pem" >/dev/null 2>&1 &
	PID=$!
	PIDS+=("$PID")
	wait_port $PORT
	measure nullsmtp $PID "$TOOLS/smtpload" -addr 127.0.0.1:$PORT -mode starttls -user u -pass p \
		-ca "$WORK/null-ca.pem" -conns 8 -msgs "$MSGS" -size 2048
	stop $PID
}

# disk: DISKMSGS messages into each server, then the data dir's size
# (du, after a clean stop: SIGTERM and wait).
disk() {
	local label bin
	for pair in $CAPTURE; do
		label=${pair%%=*} bin=${pair#*=}
		start_capture "$bin"
		measure "$label" $PID "$TOOLS/smtpload" -addr "$STARTTLS" -mode starttls -user "$INBOX" -pass "$PASS" \
			-ca "$DIR/tls/ca.pem" -conns 8 -msgs "$DISKMSGS" -size 2048 -timeout 1800s
		stop $PID
		echo "$label: data dir $(du -s --block-size=1 "$DIR" | cut -f1) bytes after a clean stop"
		rm -rf "$DIR"
	done
	start_mailpit
	measure mailpit $PID "$TOOLS/smtpload" -addr "$SMTP_ADDR" -mode starttls -user u -pass p -ca "$WORK/cert.pem" \
		-conns 8 -msgs "$DISKMSGS" -size 2048 -timeout 1800s
	stop $PID
	echo "mailpit: data dir $(du -s --block-size=1 "$DIR" | cut -f1) bytes after a clean stop"
	rm -rf "$DIR"
}

case $MODE in
webhook | smtp)
	for i in $(seq "$TRIALS"); do
		echo "--- trial $i"
		$MODE
	done
	;;
disk) disk ;;
*)
	echo "usage: sidebyside.sh webhook|smtp|disk [trials]" >&2
	exit 2
	;;
esac
