# shellcheck shell=bash disable=SC2154 # kafka.sh sets here, host, java, libs... before sourcing
# cluster.sh: kafka.sh's cluster mode, sourced by kafka.sh (not run by itself). N KRaft nodes
# on this machine, each a broker and a controller in one JVM, replication factor 3 and
# min.insync.replicas 2 by default; optionally secured: SASL_SSL (SCRAM-SHA-512) with a CA and
# node certificates generated at the first 'up', and the StandardAuthorizer on. See
# deploy/README.md, "A three-node cluster".
#
#   kafka.sh cluster up [--secure]   fetch the jars, write configs, format (once), start every
#                                    node, wait until all N brokers are listed; prints env lines
#   kafka.sh cluster down [--purge]  stop every node (SIGTERM, SIGKILL after KAFKA_STOP_TIMEOUT;
#                                    --purge: SIGKILL at once once a class archive is kept)
#   kafka.sh cluster status          per node; exit 0 iff every node runs and answers
#                                    (1: some do not; 3: none runs)
#   kafka.sh cluster kill NODE       SIGKILL one node (1..N), at once
#   kafka.sh cluster stop NODE       SIGTERM one node (controlled shutdown) and wait for it
#   kafka.sh cluster start NODE      start one node again, wait until it answers
#   kafka.sh cluster env             print the env lines again (KAFKA_BOOTSTRAP=host:port,...)
#   kafka.sh cluster logs NODE [-f] [N]   the node's log
#   kafka.sh cluster user NAME [PASSWORD] (secure) create or update a SCRAM-SHA-512 user;
#                                    prints NAME's password (generated when not given)
#   kafka.sh cluster acls ARGS...    (secure) org.apache.kafka.tools.AclCommand as the admin
#
# Node n (1..N) listens on 127.0.0.1: its broker on KAFKA_PORT+2(n-1), its controller on the
# port after it. Environment (defaults in brackets), besides kafka.sh's own:
#   KAFKA_NODES [3]   KAFKA_PORT [9092]: the first node's broker port
#   SWITCHBOARD_KAFKA_DIR [/tmp/switchboard-kafka-cluster-$KAFKA_PORT]: node-<n>/ per node,
#     tls/ (CA and certificates, secure), admin.properties (Java tools), cluster.env
#   KAFKA_HEAP_OPTS [-Xms128m -Xmx384m] per node
#   KAFKA_REPLICATION_FACTOR [min(3, N)] and KAFKA_MIN_ISR [2, 1 under 3 nodes]: the
#     cluster's defaults, the internal topics' too
#
# stdout carries only the env lines, so `eval "$(deploy/kafka/kafka.sh cluster up)"` works:
#   KAFKA_BOOTSTRAP=127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096
# and, with --secure, the client settings and the admin's credentials:
#   KAFKA_SECURITY_PROTOCOL=SASL_SSL KAFKA_SASL_MECHANISM=SCRAM-SHA-512 KAFKA_CA=<dir>/tls/ca.pem
#   KAFKA_ADMIN_USER=admin KAFKA_ADMIN_PASSWORD=<random> KAFKA_ADMIN_CONFIG=<dir>/admin.properties

c_nodes=${KAFKA_NODES:-3}
c_root=${SWITCHBOARD_KAFKA_DIR:-/tmp/switchboard-kafka-cluster-$port}
c_env=$c_root/cluster.env
c_tls=$c_root/tls
c_admin_conf=$c_root/admin.properties
c_heap=${KAFKA_HEAP_OPTS:--Xms128m -Xmx384m}
c_secure=false
c_admin_password=

# cluster_usage prints this file's header.
cluster_usage() {
	sed -n '2,/^$/p' "$here/cluster.sh" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

# c_load reads the layout 'cluster up' recorded, so that later commands work whatever the
# environment says (KAFKA_NODES, secure or not).
c_load() {
	if [[ -f $c_env ]]; then
		local k v
		while IFS='=' read -r k v; do
			case $k in
			nodes) c_nodes=$v ;;
			port) port=$v ;;
			secure) c_secure=$v ;;
			esac
		done <"$c_env"
	fi
	c_base=$port
	[[ ! -f $c_root/admin.password ]] || c_admin_password=$(<"$c_root/admin.password")
	[[ $c_nodes =~ ^[1-9][0-9]*$ ]] || die "KAFKA_NODES must be a positive number"
	((port + 2 * c_nodes - 1 <= 65535)) || die "KAFKA_PORT $port leaves no room for $c_nodes nodes (two ports each)"
}

# c_node sets the single-node globals (state, conf, pidfile, log, port, controller_port,
# bootstrap) to node n's, so that running_pid, stop_pid and log_tail work on it.
c_node() {
	local n=$1
	if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > c_nodes)); then
		die "no node '$n': nodes are 1..$c_nodes"
	fi
	state=$c_root/node-$n
	data=$state/data
	conf=$state/server.properties
	log=$state/logs/server.log
	pidfile=$state/kafka.pid
	c_port=$((c_base + 2 * (n - 1)))
	controller_port=$((c_port + 1))
	bootstrap=$host:$c_port
}

c_bootstrap() {
	local n out=
	for ((n = 1; n <= c_nodes; n++)); do
		out+=${out:+,}$host:$((c_base + 2 * (n - 1)))
	done
	echo "$out"
}

c_print_env() {
	echo "KAFKA_BOOTSTRAP=$(c_bootstrap)"
	if [[ $c_secure == true ]]; then
		echo "KAFKA_SECURITY_PROTOCOL=SASL_SSL"
		echo "KAFKA_SASL_MECHANISM=SCRAM-SHA-512"
		echo "KAFKA_CA=$c_tls/ca.pem"
		echo "KAFKA_ADMIN_USER=admin"
		echo "KAFKA_ADMIN_PASSWORD=$c_admin_password"
		echo "KAFKA_ADMIN_CONFIG=$c_admin_conf"
	fi
}

c_random() { head -c 18 /dev/urandom | base64 | tr '+/' 'xy' | tr -d '=\n'; }

# c_answering asks node n's broker for metadata and succeeds when it lists at least want
# brokers (default 1).
c_answering() {
	local want=${2:-1} out
	c_node "$1"
	# kcat 1.7.1 (librdkafka 2.0.2, Debian 12) fails SCRAM against this cluster although the
	# credentials are right (Java clients and librdkafka 2.11 pass): secure probes use Java.
	if [[ $c_secure != true ]] && command -v kcat >/dev/null; then
		out=$(kcat -L -b "$bootstrap" -m 3 2>/dev/null) || return 1
		[[ $(sed -n 's/^ *\([0-9][0-9]*\) brokers:.*/\1/p' <<<"$out") -ge $want ]]
	else
		[[ -f $c_root/probe.properties ]] || c_tool_configs
		out=$(timeout 30 "$java" -Xmx128m -Dlog4j2.configurationFile="$log4j_tools" -cp "$libs/*" \
			org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$bootstrap" \
			--command-config "$c_root/probe.properties" 2>/dev/null) || return 1
		[[ $(grep -c ' (id: ' <<<"$out") -ge $want ]]
	fi
}

# c_tool_configs writes the Java tools' log config and client configs: probe.properties
# (short timeouts) and admin.properties (the admin's credentials, secure only).
c_tool_configs() {
	log4j_tools=$c_root/log4j2-tools.properties
	local sec=
	if [[ $c_secure == true ]]; then
		sec=$(
			cat <<-EOF
				security.protocol=SASL_SSL
				sasl.mechanism=SCRAM-SHA-512
				sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$c_admin_password";
				ssl.truststore.type=PEM
				ssl.truststore.location=$c_tls/ca.pem
			EOF
		)
	fi
	(
		umask 077
		printf '%s\n' "request.timeout.ms=10000" "default.api.timeout.ms=15000" "$sec" >"$c_root/probe.properties"
		printf '%s\n' "# The cluster admin's client settings (kafka.sh cluster), for Kafka's Java tools." "$sec" >"$c_admin_conf"
	)
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
}

# c_certs makes a CA and one certificate per node (SAN 127.0.0.1 and localhost), once per
# state dir: ca.pem is what clients trust (ssl.ca.location); node-<n>.pem holds the node's
# key (PKCS#8) and certificate, the PEM keystore Kafka reads.
c_certs() {
	command -v openssl >/dev/null || die "openssl not found: needed to make the cluster's certificates"
	mkdir -p "$c_tls"
	chmod 700 "$c_tls"
	if [[ ! -f $c_tls/ca.pem ]]; then
		say "tls: a new CA in $c_tls/ca.pem"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
			-subj "/CN=switchboard local kafka CA" -keyout "$c_tls/ca.key" -out "$c_tls/ca.pem" 2>/dev/null ||
			die "openssl could not make the CA"
	fi
	local n
	for ((n = 1; n <= c_nodes; n++)); do
		[[ ! -f $c_tls/node-$n.pem ]] || continue
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=kafka-node-$n" \
			-keyout "$c_tls/node-$n.key" -out "$c_tls/node-$n.csr" 2>/dev/null || die "openssl could not make node $n's key"
		openssl x509 -req -in "$c_tls/node-$n.csr" -CA "$c_tls/ca.pem" -CAkey "$c_tls/ca.key" -CAcreateserial \
			-days 30 -out "$c_tls/node-$n.crt" \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n') 2>/dev/null ||
			die "openssl could not sign node $n's certificate"
		cat "$c_tls/node-$n.key" "$c_tls/node-$n.crt" >"$c_tls/node-$n.pem"
		rm -f "$c_tls/node-$n.csr"
	done
}

# c_write_config writes node n's server.properties (rewritten on every 'up' and 'start').
c_write_config() {
	local n=$1 voters="" i rf=${KAFKA_REPLICATION_FACTOR:-} isr=${KAFKA_MIN_ISR:-}
	c_node "$n"
	[[ -n $rf ]] || rf=$((c_nodes < 3 ? c_nodes : 3))
	[[ -n $isr ]] || isr=$((rf < 3 ? 1 : 2))
	for ((i = 1; i <= c_nodes; i++)); do
		voters+=${voters:+,}$i@$host:$((c_base + 2 * (i - 1) + 1))
	done
	mkdir -p "$data" "$(dirname "$log")"
	cp "$log4j_server" "$state/log4j2-server.properties"
	(
		umask 077
		cat >"$conf" <<-EOF
			# Written by deploy/kafka/kafka.sh cluster for Kafka $kafka_version; rewritten on every start.
			# Node $n of $c_nodes: broker and controller in one process, KRaft.
			process.roles=broker,controller
			node.id=$n
			controller.quorum.voters=$voters
			controller.listener.names=CONTROLLER
			log.dirs=$data

			auto.create.topics.enable=false
			num.partitions=1
			default.replication.factor=$rf
			min.insync.replicas=$isr
			offsets.topic.replication.factor=$rf
			offsets.topic.num.partitions=10
			transaction.state.log.replication.factor=$rf
			transaction.state.log.min.isr=$isr
			transaction.state.log.num.partitions=10
			share.coordinator.state.topic.replication.factor=$rf
			share.coordinator.state.topic.min.isr=$isr
			unclean.leader.election.enable=false

			group.initial.rebalance.delay.ms=0
			group.min.session.timeout.ms=1000

			# A node's controlled shutdown and its unfencing after a start move one broker
			# heartbeat at a time: every 500 ms rather than 2 s (the session stays 9 s).
			broker.heartbeat.interval.ms=500

			# N JVMs on a machine with few cores.
			num.network.threads=2
			num.io.threads=2
			num.replica.fetchers=1
			background.threads=4
			log.retention.hours=24
		EOF
		if [[ $c_secure == true ]]; then
			cat >>"$conf" <<-EOF

				# SASL_SSL for clients and between brokers (SCRAM-SHA-512, users in the metadata
				# log); the controllers' listener is SASL_SSL with PLAIN for the admin only, since
				# SCRAM users are not known before the metadata log is read.
				listeners=SASL_SSL://$host:$c_port,CONTROLLER://$host:$controller_port
				advertised.listeners=SASL_SSL://$host:$c_port
				listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL
				inter.broker.listener.name=SASL_SSL
				sasl.enabled.mechanisms=SCRAM-SHA-512
				sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
				listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$c_admin_password";
				sasl.mechanism.controller.protocol=PLAIN
				listener.name.controller.sasl.enabled.mechanisms=PLAIN
				listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$c_admin_password" user_admin="$c_admin_password";
				ssl.keystore.type=PEM
				ssl.keystore.location=$c_tls/node-$n.pem
				ssl.truststore.type=PEM
				ssl.truststore.location=$c_tls/ca.pem
				ssl.endpoint.identification.algorithm=https

				# Every request is authorized: ACLs, the admin a super user, nothing allowed
				# without an ACL.
				authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
				super.users=User:admin
				allow.everyone.if.no.acl.found=false
			EOF
		else
			cat >>"$conf" <<-EOF

				listeners=PLAINTEXT://$host:$c_port,CONTROLLER://$host:$controller_port
				advertised.listeners=PLAINTEXT://$host:$c_port
				listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
				inter.broker.listener.name=PLAINTEXT
			EOF
		fi
	)
}

# Class data sharing: a node's JVM spends most of its start loading and verifying Kafka's
# classes, and with three nodes on a two-core host that is most of a restart (the drill's
# rolling restart). A node started without an archive writes one of the classes it loaded
# when it stops cleanly (-XX:ArchiveClassesAtExit); kafka.sh keeps the first such archive
# beside the jars, one per Kafka release and JVM build, and every later start maps it
# (-XX:SharedArchiveFile). An archive the JVM cannot use costs a warning in the node's log,
# not the start. KAFKA_CDS=false turns it off.
c_cds_archive() {
	local jvm
	[[ ${KAFKA_CDS:-true} == true ]] || return 1
	jvm=$(readlink -f "$(command -v "$java")" 2>/dev/null) || return 1
	jvm=$(stat -c '%s-%Y' "${jvm%/bin/java}/lib/server/libjvm.so" 2>/dev/null) || return 1
	echo "$cache/cds-$(printf '%s' "$jvm" | cksum | cut -d' ' -f1).jsa"
}

# c_cds_flags prints node n's CDS flag (c_node n first): map the kept archive, or write one
# at exit.
c_cds_flags() {
	local archive
	archive=$(c_cds_archive) || return 0
	if [[ -s $archive ]]; then
		echo "-XX:SharedArchiveFile=$archive"
	else
		echo "-XX:ArchiveClassesAtExit=$state/cds.jsa"
	fi
}

# c_cds_keep keeps the archive a node wrote as it stopped, when none is kept yet (c_node n
# first; the node has exited). A node that needed SIGKILL may have left half an archive,
# which is dropped.
c_cds_keep() {
	local archive tmp
	[[ -s $state/cds.jsa ]] || return 0
	if ! $stop_killed && archive=$(c_cds_archive) && [[ ! -s $archive ]] && tmp=$(mktemp "$cache/cds.XXXXXX"); then
		if cp "$state/cds.jsa" "$tmp" && mv -f "$tmp" "$archive"; then
			say "node ${state##*-}: kept its class archive for later starts: $archive"
		else
			rm -f "$tmp"
		fi
	fi
	rm -f "$state/cds.jsa"
}

# c_start_node starts node n (formatting its storage first if new) without waiting.
c_start_node() {
	local n=$1 pid deadline
	c_node "$n"
	if pid=$(running_pid); then
		say "node $n: already running, pid $pid"
		return 0
	fi
	rm -f "$pidfile"
	if port_open "$c_port" || port_open "$controller_port"; then
		die "node $n: port $c_port or $controller_port on $host is already in use by another process (set KAFKA_PORT)"
	fi
	c_write_config "$n"
	[[ ! -f $log ]] || mv -f "$log" "$log.1"
	if [[ ! -f $data/meta.properties ]]; then
		local scram=()
		[[ $c_secure != true ]] || scram=(--add-scram "SCRAM-SHA-512=[name=admin,password=$c_admin_password]")
		say "node $n: formatting $data (cluster id $c_cluster_id)"
		if ! "$java" -Xmx256m -Dlog4j2.configurationFile="$log4j_tools" -cp "$libs/*" \
			kafka.tools.StorageTool format --cluster-id "$c_cluster_id" --config "$conf" "${scram[@]}" >>"$log" 2>&1; then
			log_tail
			die "node $n: storage format failed"
		fi
	fi
	say "node $n: start (broker $host:$c_port, controller $controller_port, heap $c_heap), log $log"
	# As in kafka.sh up: own session, pid written by the inner shell, lock fds not inherited.
	local cds
	cds=$(c_cds_flags)
	# shellcheck disable=SC2016,SC2086 # $$ is the inner shell's; c_heap holds several flags, cds none or one
	setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidfile" \
		"$java" $c_heap $cds -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
		-Djava.awt.headless=true -Dlog4j2.configurationFile="$state/log4j2-server.properties" \
		-Dkafka.logs.dir="$state/logs" -cp "$libs/*" kafka.Kafka "$conf" \
		>>"$log" 2>&1 </dev/null 8>&- 9>&- &
	deadline=$((SECONDS + 10))
	until [[ -s $pidfile ]]; do
		((SECONDS < deadline)) || {
			log_tail
			die "node $n did not start (no pid file after 10s)"
		}
		sleep 0.1
	done
	say "node $n: pid $(<"$pidfile")"
}

# c_wait waits until node n answers and lists want brokers, or dies; with "started", only
# until its log says it started (a secure probe is a JVM: 'up' asks only the last node).
c_wait() {
	local n=$1 want=$2 only=${3:-} deadline=$((SECONDS + ready_timeout))
	while :; do
		c_node "$n"
		if ! running_pid >/dev/null; then
			log_tail
			die "node $n exited during startup"
		fi
		# A JVM per probe is dear: first the node's own word that it started.
		if grep -q 'Kafka Server started' "$log" 2>/dev/null; then
			[[ $only != started ]] || return 0
			c_answering "$n" "$want" && return 0
		fi
		if ((SECONDS >= deadline)); then
			log_tail
			die "node $n did not list $want brokers within ${ready_timeout}s"
		fi
		sleep 0.5
	done
}

c_lock() {
	mkdir -p "$c_root"
	exec 8>"$c_root/.lock"
	flock 8
}

cluster_up() {
	local start=$SECONDS n
	case ${1:-} in
	--secure) c_secure=true ;;
	"") ;;
	*) cluster_usage ;;
	esac
	c_lock
	if [[ -f $c_env ]]; then
		local want=$c_secure
		c_load
		[[ $c_secure == "$want" ]] || die "$c_root holds a cluster made with secure=$c_secure: 'kafka.sh cluster down --purge' first"
	fi
	check_java
	fetch
	touch "$c_root/.switchboard-kafka"
	[[ -f $c_root/cluster.id ]] || new_cluster_id >"$c_root/cluster.id"
	c_cluster_id=$(<"$c_root/cluster.id")
	if [[ $c_secure == true ]]; then
		if [[ ! -f $c_root/admin.password ]]; then
			(
				umask 077
				c_random >"$c_root/admin.password"
			)
		fi
		c_admin_password=$(<"$c_root/admin.password")
		c_certs
	fi
	printf '%s\n' "nodes=$c_nodes" "port=$port" "secure=$c_secure" >"$c_env"
	c_tool_configs
	# kafka.sh's server log4j config, written once for all nodes to copy.
	state=$c_root
	log4j_server=$c_root/log4j2-server.properties
	write_log4j_server
	for ((n = 1; n <= c_nodes; n++)); do
		c_start_node "$n"
	done
	say "wait: until every node answers and lists $c_nodes brokers (up to ${ready_timeout}s each)"
	for ((n = 1; n <= c_nodes; n++)); do
		if [[ $c_secure == true ]] && ((n < c_nodes)); then
			c_wait "$n" "$c_nodes" started
		else
			c_wait "$n" "$c_nodes"
		fi
	done
	say "up: $c_nodes nodes of Kafka $kafka_version on $(c_bootstrap)$([[ $c_secure == true ]] && echo ' (SASL_SSL, ACLs on)'), in $((SECONDS - start))s"
	c_print_env
}

cluster_down() {
	local purge=false n pid
	case ${1:-} in
	--purge) purge=true ;;
	"") ;;
	*) cluster_usage ;;
	esac
	if [[ ! -d $c_root ]]; then
		say "cluster down: nothing at $c_root"
		return 0
	fi
	c_lock
	c_load
	# What --purge removes needs no clean shutdown (each node's takes 10-40 s on a busy
	# host): SIGKILL, unless no class archive is kept yet (a node writes it as it stops).
	local sig=TERM archive
	if $purge && archive=$(c_cds_archive) && [[ -s $archive ]]; then
		sig=KILL
	fi
	for ((n = 1; n <= c_nodes; n++)); do
		c_node "$n"
		if pid=$(running_pid); then
			say "node $n: SIG$sig to pid $pid"
			kill -"$sig" "$pid" 2>/dev/null || true
		fi
	done
	for ((n = 1; n <= c_nodes; n++)); do
		c_node "$n"
		if pid=$(running_pid); then
			stop_pid "$pid"
		fi
		rm -f "$pidfile"
		c_cds_keep
	done
	say "cluster down: stopped"
	if $purge; then
		[[ -f $c_root/.switchboard-kafka ]] || die "refusing to purge $c_root: it was not made by kafka.sh (no .switchboard-kafka)"
		rm -rf "$c_root"
		say "purge: removed $c_root"
	fi
}

cluster_status() {
	local n pid up=0 ok=0
	c_load
	for ((n = 1; n <= c_nodes; n++)); do
		c_node "$n"
		if ! pid=$(running_pid); then
			say "node $n: not running (broker $bootstrap)"
			continue
		fi
		up=$((up + 1))
		if c_answering "$n"; then
			ok=$((ok + 1))
			say "node $n: running, pid $pid, answering on $bootstrap"
		else
			say "node $n: pid $pid is running but not answering on $bootstrap"
		fi
	done
	((up > 0)) || return 3
	((ok == c_nodes)) || return 1
}

cluster_node_cmd() {
	local verb=$1 n=${2:-} pid
	[[ -n $n ]] || cluster_usage
	c_lock
	c_load
	c_node "$n"
	case $verb in
	kill)
		pid=$(running_pid) || die "node $n is not running"
		kill -KILL "$pid"
		local deadline=$((SECONDS + 10))
		while running_pid >/dev/null && ((SECONDS < deadline)); do
			sleep 0.1
		done
		! running_pid >/dev/null || die "node $n (pid $pid) survived SIGKILL"
		rm -f "$pidfile"
		say "node $n: killed (SIGKILL to pid $pid)"
		;;
	stop)
		pid=$(running_pid) || {
			say "node $n: not running"
			return 0
		}
		local start=$SECONDS
		stop_pid "$pid"
		rm -f "$pidfile"
		say "node $n: stopped in $((SECONDS - start))s"
		c_cds_keep
		;;
	start)
		local start=$SECONDS
		if pid=$(running_pid); then # no JVM check: wait for it to answer, as after a start
			say "node $n: already running, pid $pid"
			c_wait "$n" 1
			return 0
		fi
		check_java
		fetch quiet
		c_cluster_id=$(<"$c_root/cluster.id")
		c_start_node "$n"
		c_wait "$n" 1
		say "node $n: answering on $bootstrap after $((SECONDS - start))s"
		;;
	esac
}

cluster_user() {
	local name=${1:-} pw=${2:-}
	[[ -n $name ]] || cluster_usage
	c_load
	[[ $c_secure == true ]] || die "the cluster is not secure: users need 'cluster up --secure'"
	[[ -n $pw ]] || pw=$(c_random)
	c_tool_configs
	"$java" -Xmx256m -Dlog4j2.configurationFile="$log4j_tools" -cp "$libs/*" org.apache.kafka.tools.ConfigCommand \
		--bootstrap-server "$(c_bootstrap)" --command-config "$c_admin_conf" --alter --entity-type users \
		--entity-name "$name" --add-config "SCRAM-SHA-512=[password=$pw]" >&2 8>&- 9>&- ||
		die "could not set the SCRAM-SHA-512 credential of $name"
	echo "$name:$pw"
}

cluster_main() {
	(($# >= 1)) || cluster_usage
	local cmd=$1
	shift
	c_base=$port
	case $cmd in
	up) cluster_up "$@" ;;
	down) cluster_down "$@" ;;
	status) cluster_status "$@" ;;
	kill | stop | start) cluster_node_cmd "$cmd" "$@" ;;
	env)
		c_load
		c_print_env
		;;
	logs)
		c_load
		c_node "${1:-}"
		shift
		cmd_logs "$@"
		;;
	user) cluster_user "$@" ;;
	acls)
		c_load
		[[ $c_secure == true ]] || die "the cluster is not secure: ACLs need 'cluster up --secure'"
		c_tool_configs
		cmd_tool org.apache.kafka.tools.AclCommand --bootstrap-server "$(c_bootstrap)" --command-config "$c_admin_conf" "$@"
		;;
	-h | --help | help) cluster_usage ;;
	*) cluster_usage ;;
	esac
}
