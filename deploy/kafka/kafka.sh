#!/usr/bin/env bash
# kafka.sh: one local Apache Kafka node (broker and controller in one JVM, KRaft) for
# development and integration tests, run from the release's jars on Maven Central: no
# tarball, no Docker. See deploy/README.md.
#
#   kafka.sh up              fetch the jars (once), format storage (once), start, wait until
#                            the broker answers a metadata request; prints
#                            KAFKA_BOOTSTRAP=127.0.0.1:<port> on stdout
#   kafka.sh down [--purge]  SIGTERM, wait, SIGKILL after KAFKA_STOP_TIMEOUT; --purge also
#                            removes the state dir (data, config, logs)
#   kafka.sh status          exit 0 iff running and answering (1: running, not answering;
#                            3: not running)
#   kafka.sh logs [-f] [N]   last N (100) lines of the broker log, -f to follow
#   kafka.sh env             print KAFKA_BOOTSTRAP=127.0.0.1:<port>
#   kafka.sh fetch           only fetch the jars into the cache
#   kafka.sh topics ARGS...  org.apache.kafka.tools.TopicCommand against this broker
#   kafka.sh tool CLASS ARGS...  any main class from the jars (admin and console tools)
#   kafka.sh cluster CMD ...  N nodes instead of one, optionally SASL_SSL with ACLs:
#                            up, down, status, kill/stop/start NODE, ... (see cluster.sh)
#
# Environment (defaults in brackets):
#   KAFKA_PORT [9092]  KAFKA_CONTROLLER_PORT [9093]
#   SWITCHBOARD_KAFKA_DIR [/tmp/switchboard-kafka-$KAFKA_PORT]   state: data, config, logs, pid
#   SWITCHBOARD_CACHE [$HOME/.cache/switchboard]   jars in kafka-<version>/libs
#   KAFKA_READY_TIMEOUT [120] and KAFKA_STOP_TIMEOUT [60], in seconds
#   KAFKA_HEAP_OPTS [-Xms256m -Xmx512m]  JAVA_HOME (else java on PATH; Java 17 or newer)
#
# Progress goes to stderr, one line per step; stdout carries only KAFKA_BOOTSTRAP=... so that
# `eval "$(deploy/kafka/kafka.sh up)"` works.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pom=$here/pom.xml
kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
[[ -n $kafka_version ]] || { echo "kafka.sh: no <kafka.version> in $pom" >&2; exit 2; }

port=${KAFKA_PORT:-9092}
controller_port=${KAFKA_CONTROLLER_PORT:-9093}
host=127.0.0.1
bootstrap=$host:$port
cache=${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}/kafka-$kafka_version
libs=$cache/libs
state=${SWITCHBOARD_KAFKA_DIR:-/tmp/switchboard-kafka-$port}
data=$state/data
conf=$state/server.properties
log4j_server=$state/log4j2-server.properties
log4j_tools=$state/log4j2-tools.properties
probe_conf=$state/probe.properties
log=$state/logs/server.log
pidfile=$state/kafka.pid
marker=$state/.switchboard-kafka
ready_timeout=${KAFKA_READY_TIMEOUT:-120}
stop_timeout=${KAFKA_STOP_TIMEOUT:-60}
heap=${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}
java=${JAVA_HOME:+$JAVA_HOME/bin/}java

say() { echo "kafka.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

[[ $port =~ ^[0-9]+$ && $controller_port =~ ^[0-9]+$ ]] || die "KAFKA_PORT and KAFKA_CONTROLLER_PORT must be numbers"
[[ $port != "$controller_port" ]] || die "KAFKA_PORT and KAFKA_CONTROLLER_PORT must differ"

# lock serialises kafka.sh runs on the same state dir (fd 8) or the same jar cache (fd 9).
lock_state() {
	mkdir -p "$state"
	exec 8>"$state/.lock"
	flock 8
}

check_java() {
	command -v "$java" >/dev/null || die "java not found (install a JDK 17 or newer, or set JAVA_HOME)"
	local v
	v=$("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
	[[ ${v%%.*} =~ ^[0-9]+$ && ${v%%.*} -ge 17 ]] || die "Kafka $kafka_version needs Java 17 or newer; $java is ${v:-unknown}"
}

# fetch copies the pinned release's runtime jars into the cache, unless the cache already holds
# a complete copy made from this very pom.xml. "fetch quiet" says nothing when cached.
fetch() {
	local stamp tmp quiet=${1:-}
	stamp=$(sha256sum "$pom" | cut -c1-16)
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9
	if [[ -f $cache/.complete && $(<"$cache/.complete") == "$stamp" && -f $libs/kafka_2.13-$kafka_version.jar ]]; then
		[[ $quiet == quiet ]] || say "jars: Kafka $kafka_version cached in $libs"
		exec 9>&-
		return
	fi
	command -v mvn >/dev/null || die "mvn not found: needed once to fetch the Kafka jars into $cache"
	say "jars: fetching Kafka $kafka_version from Maven Central into $libs (once per machine)"
	tmp=$(mktemp -d "$cache/fetch.XXXXXX")
	if ! mvn -B -ntp -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory="$tmp/libs" >"$tmp/mvn.log" 2>&1; then
		tail -n 50 "$tmp/mvn.log" >&2
		rm -rf "$tmp"
		die "mvn could not fetch the Kafka $kafka_version jars (log above)"
	fi
	[[ -f $tmp/libs/kafka_2.13-$kafka_version.jar ]] || { rm -rf "$tmp"; die "mvn finished but kafka_2.13-$kafka_version.jar is missing"; }
	rm -rf "$libs" "$cache/.complete"
	mv "$tmp/libs" "$libs"
	rm -rf "$tmp"
	echo "$stamp" >"$cache/.complete"
	say "jars: $(find "$libs" -name '*.jar' | wc -l) jars in $libs"
	exec 9>&-
}

# running_pid prints the pid of this state dir's broker if it is alive (a zombie or a reused
# pid does not count: the command line must name this state dir's server.properties).
running_pid() {
	local pid
	[[ -f $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$conf" || return 1
	echo "$pid"
}

port_open() {
	timeout 2 bash -c "exec 3<>/dev/tcp/$host/$1" 2>/dev/null
}

# answering sends a real metadata request and succeeds once a broker is listed.
answering() {
	if command -v kcat >/dev/null; then
		kcat -L -b "$bootstrap" -m 3 2>/dev/null | grep -Eq '^ *[1-9][0-9]* brokers:'
	else
		[[ -f $probe_conf ]] || write_tool_configs
		timeout 30 "$java" -Xmx128m -Dlog4j2.configurationFile="$log4j_tools" -cp "$libs/*" \
			org.apache.kafka.tools.ClusterTool cluster-id --bootstrap-server "$bootstrap" \
			--command-config "$probe_conf" >/dev/null 2>&1
	fi
}

write_tool_configs() {
	mkdir -p "$state"
	cat >"$log4j_tools" <<-'EOF'
		status = warn
		appender.err.type = Console
		appender.err.name = STDERR
		appender.err.target = SYSTEM_ERR
		appender.err.layout.type = PatternLayout
		appender.err.layout.pattern = [%d] %p %m (%c)%n
		rootLogger.level = WARN
		rootLogger.appenderRef.err.ref = STDERR
	EOF
	cat >"$probe_conf" <<-'EOF'
		request.timeout.ms=2000
		default.api.timeout.ms=3000
	EOF
}

write_configs() {
	mkdir -p "$data" "$(dirname "$log")"
	touch "$marker"
	write_tool_configs
	write_log4j_server
	write_server_properties
}

write_log4j_server() {
	cat >"$log4j_server" <<-'EOF'
		# The broker logs to stdout; kafka.sh sends stdout to logs/server.log. No log4j
		# shutdown hook, so that the broker's own shutdown is logged to the end.
		status = warn
		shutdownHook = disable
		appender.out.type = Console
		appender.out.name = STDOUT
		appender.out.layout.type = PatternLayout
		appender.out.layout.pattern = [%d] %p %m (%c)%n
		rootLogger.level = INFO
		rootLogger.appenderRef.out.ref = STDOUT
		logger.request.name = kafka.request.logger
		logger.request.level = WARN
		logger.state.name = state.change.logger
		logger.state.level = WARN
	EOF
}

write_server_properties() {
	cat >"$conf" <<-EOF
		# Written by deploy/kafka/kafka.sh for Kafka $kafka_version; rewritten on every 'up'.
		# One node, broker and controller in one process, KRaft, plaintext on loopback.
		process.roles=broker,controller
		node.id=1
		controller.quorum.voters=1@$host:$controller_port
		listeners=PLAINTEXT://$host:$port,CONTROLLER://$host:$controller_port
		advertised.listeners=PLAINTEXT://$host:$port
		listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
		controller.listener.names=CONTROLLER
		inter.broker.listener.name=PLAINTEXT
		log.dirs=$data

		# Topics are created explicitly (by Switchboard's setup or by tests), never by a typo.
		auto.create.topics.enable=false
		num.partitions=1
		default.replication.factor=1
		min.insync.replicas=1

		# Single node: the internal topics have one replica. Fewer partitions than the
		# default 50 make a test's first group join and first transaction come up faster.
		offsets.topic.replication.factor=1
		offsets.topic.num.partitions=10
		transaction.state.log.replication.factor=1
		transaction.state.log.min.isr=1
		transaction.state.log.num.partitions=10
		share.coordinator.state.topic.replication.factor=1
		share.coordinator.state.topic.min.isr=1

		# Tests: no delay before the first rebalance, and short session timeouts allowed.
		group.initial.rebalance.delay.ms=0
		group.min.session.timeout.ms=1000

		# A laptop or CI machine with two cores, shared with the tests.
		num.network.threads=2
		num.io.threads=4
		log.retention.hours=24
	EOF
}

new_cluster_id() {
	local id
	# A Kafka Uuid: 16 random bytes, URL-safe base64 without padding, not starting with '-'.
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		[[ $id != -* ]] && break
	done
	echo "$id"
}

log_tail() {
	if [[ -f $log ]]; then
		say "last 50 lines of $log:"
		tail -n 50 "$log" >&2
	fi
}

cmd_up() {
	local pid deadline cid start
	start=$SECONDS
	lock_state
	if pid=$(running_pid); then
		if answering; then
			say "already up: pid $pid, answering on $bootstrap; log $log"
			echo "KAFKA_BOOTSTRAP=$bootstrap"
			return 0
		fi
		say "pid $pid is running but not answering yet; waiting for it"
	else
		rm -f "$pidfile"
		check_java
		fetch
		if port_open "$port" || port_open "$controller_port"; then
			die "port $port or $controller_port on $host is already in use by another process (set KAFKA_PORT/KAFKA_CONTROLLER_PORT)"
		fi
		write_configs
		# One log per run; the previous run's stays beside it as server.log.1.
		[[ ! -f $log ]] || mv -f "$log" "$log.1"
		say "config: $conf"
		if [[ ! -f $data/meta.properties ]]; then
			cid=$(new_cluster_id)
			say "storage: formatting $data (cluster id $cid)"
			if ! "$java" -Xmx256m -Dlog4j2.configurationFile="$log4j_tools" -cp "$libs/*" \
				kafka.tools.StorageTool format --cluster-id "$cid" --config "$conf" >>"$log" 2>&1; then
				log_tail
				die "storage format failed"
			fi
		else
			say "storage: reusing $data"
		fi
		say "start: java kafka.Kafka $conf (heap $heap), log $log"
		# setsid: the broker gets its own session, so a Ctrl-C in the terminal that ran 'up'
		# does not reach it ('down' stops it). The inner shell writes its own pid, which
		# the JVM keeps by exec, whether or not setsid had to fork. The broker must not
		# inherit the lock fds 8 and 9, or it would hold the locks for as long as it runs.
		# shellcheck disable=SC2016,SC2086 # $$ is the inner shell's; heap holds several flags
		setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidfile" \
			"$java" $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
			-Djava.awt.headless=true -Dlog4j2.configurationFile="$log4j_server" \
			-Dkafka.logs.dir="$state/logs" -cp "$libs/*" kafka.Kafka "$conf" \
			>>"$log" 2>&1 </dev/null 8>&- 9>&- &
		deadline=$((SECONDS + 10))
		until [[ -s $pidfile ]]; do
			((SECONDS < deadline)) || { log_tail; die "the broker did not start (no pid file after 10s)"; }
			sleep 0.1
		done
		pid=$(<"$pidfile")
		say "started: pid $pid (pid file $pidfile)"
	fi

	say "wait: for a metadata answer on $bootstrap (up to ${ready_timeout}s)"
	deadline=$((SECONDS + ready_timeout))
	while :; do
		if ! running_pid >/dev/null; then
			log_tail
			rm -f "$pidfile"
			die "the broker exited during startup"
		fi
		if answering; then
			break
		fi
		if ((SECONDS >= deadline)); then
			log_tail
			say "stopping pid $pid: not answering after ${ready_timeout}s"
			stop_pid "$pid"
			die "the broker did not answer a metadata request within ${ready_timeout}s"
		fi
		sleep 0.5
	done
	say "up: Kafka $kafka_version on $bootstrap, pid $pid, in $((SECONDS - start))s; log $log"
	echo "KAFKA_BOOTSTRAP=$bootstrap"
}

# stop_pid stops pid: SIGTERM, then SIGKILL after stop_timeout; stop_killed says whether it
# came to that.
stop_killed=false
stop_pid() {
	local pid=$1 deadline
	stop_killed=false
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + stop_timeout))
	while running_pid >/dev/null && ((SECONDS < deadline)); do
		sleep 0.2
	done
	if running_pid >/dev/null; then
		say "pid $pid still running after ${stop_timeout}s: SIGKILL"
		stop_killed=true
		kill -KILL "$pid" 2>/dev/null || true
		deadline=$((SECONDS + 10))
		while running_pid >/dev/null && ((SECONDS < deadline)); do
			sleep 0.2
		done
		! running_pid >/dev/null || die "pid $pid survived SIGKILL"
	fi
}

cmd_down() {
	local purge=false pid start
	case ${1:-} in
	--purge) purge=true ;;
	"") ;;
	*) usage ;;
	esac
	start=$SECONDS
	if [[ ! -d $state ]]; then
		say "down: not running (no state dir $state)"
		return 0
	fi
	lock_state
	if pid=$(running_pid); then
		say "stop: SIGTERM to pid $pid (SIGKILL after ${stop_timeout}s)"
		stop_pid "$pid"
		say "down: stopped in $((SECONDS - start))s"
	else
		say "down: not running"
	fi
	rm -f "$pidfile"
	if $purge; then
		[[ -f $marker || -z $(find "$state" -mindepth 1 -maxdepth 1 ! -name .lock -print -quit) ]] ||
			die "refusing to purge $state: it was not made by kafka.sh (no $marker)"
		rm -rf "$state"
		say "purge: removed $state"
	fi
}

cmd_status() {
	local pid
	if ! pid=$(running_pid); then
		say "status: not running ($state)"
		return 3
	fi
	if answering; then
		say "status: running, pid $pid, answering on $bootstrap; log $log"
		return 0
	fi
	say "status: pid $pid is running but not answering on $bootstrap; log $log"
	return 1
}

cmd_logs() {
	local follow=() n=100
	while (($#)); do
		case $1 in
		-f) follow=(-F) ;;
		[0-9]*) n=$1 ;;
		*) usage ;;
		esac
		shift
	done
	[[ -f $log ]] || die "no log at $log"
	say "log: $log"
	tail -n "$n" "${follow[@]}" "$log"
}

cmd_tool() {
	(($# >= 1)) || usage
	check_java
	fetch quiet
	[[ -f $log4j_tools ]] || write_tool_configs
	exec "$java" -Xmx256m -Dlog4j2.configurationFile="$log4j_tools" -cp "$libs/*" "$@" 8>&- 9>&-
}

main() {
	(($# >= 1)) || usage
	local cmd=$1
	shift
	case $cmd in
	up) cmd_up "$@" ;;
	down) cmd_down "$@" ;;
	status) cmd_status "$@" ;;
	logs) cmd_logs "$@" ;;
	env) echo "KAFKA_BOOTSTRAP=$bootstrap" ;;
	fetch)
		check_java
		fetch
		;;
	topics) cmd_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" "$@" ;;
	tool) cmd_tool "$@" ;;
	cluster)
		# shellcheck source=deploy/kafka/cluster.sh
		source "$here/cluster.sh"
		cluster_main "$@"
		;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
