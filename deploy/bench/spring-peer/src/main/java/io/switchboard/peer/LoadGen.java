package io.switchboard.peer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.requestreply.ReplyingKafkaTemplate;
import org.springframework.kafka.requestreply.RequestReplyFuture;

/**
 * One open-loop load generator for both systems: requests are sent on
 * schedule whether or not answers come back, so a slow system shows as
 * latency, never as a lower offered rate.
 *
 * <ul>
 *   <li>{@code spring}: ReplyingKafkaTemplate.sendAndReceive on the request
 *       topic; an answer is the reply it completes with (read
 *       read_committed with --isolation read_committed).</li>
 *   <li>{@code switchboard}: an IntentRequest (JSON) on Switchboard's requests
 *       topic, keyed by intent id; an answer is its result, read from the
 *       results topic by a read_committed consumer.</li>
 * </ul>
 *
 * <p>Each rate runs for --step-seconds; then the load pauses for
 * --max-p99-ms plus 500 ms, and the step is judged on the requests it sent:
 * latency from the send to the answer as this process saw it (an unanswered
 * request counts as over the limit). With --step-up it stops after the first
 * step whose p99 exceeds --max-p99-ms. CPU per answered request comes from
 * /proc/PID/stat (utime + stime) of the processes named in --cpu and of this
 * one, over the step and its pause.
 *
 * <p>Output, one line per step: {@code step mode=... rate=... sent=...
 * answered=... p50_ms=... p99_ms=... held=yes|no cpu_us.NAME=...}, then
 * {@code knee mode=... rate=...} with --step-up, ending in {@code bound=lower}
 * when every step held (the knee is above the highest rate offered).
 */
public final class LoadGen {
    private final Map<String, String> opt;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private long[] sentNs = new long[0];
    private long[] doneNs = new long[0];
    private final AtomicLong answered = new AtomicLong();
    private String payloadPad;

    private LoadGen(Map<String, String> opt) {
        this.opt = opt;
    }

    /** Driver sends one request; it calls done(seq) when the answer is in. */
    private interface Driver extends AutoCloseable {
        void send(long seq, String id, String payload);

        @Override
        void close();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            opt.put(args[i].substring(2), args[i + 1]);
        }
        new LoadGen(opt).run();
    }

    private String need(String key) {
        String v = opt.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    private void run() throws Exception {
        String mode = need("mode");
        String bootstrap = need("bootstrap");
        double[] rates = Arrays.stream(need("rates").split(",")).mapToDouble(Double::parseDouble).toArray();
        int stepSeconds = Integer.parseInt(opt.getOrDefault("step-seconds", "10"));
        long maxP99Ms = Long.parseLong(opt.getOrDefault("max-p99-ms", "500"));
        boolean stepUp = Boolean.parseBoolean(opt.getOrDefault("step-up", "false"));
        payloadPad = "x".repeat(Math.max(0, Integer.parseInt(opt.getOrDefault("payload-bytes", "100")) - 40));
        Map<String, Long> cpuPids = new LinkedHashMap<>();
        for (String kv : opt.getOrDefault("cpu", "").split(",")) {
            if (!kv.isBlank()) {
                String[] p = kv.split("=", 2);
                cpuPids.put(p[0], Long.parseLong(p[1]));
            }
        }
        cpuPids.put("loadgen", ProcessHandle.current().pid());

        long total = 200; // the warm-up
        for (double r : rates) {
            total += (long) Math.ceil(r * stepSeconds) + 1;
        }
        sentNs = new long[(int) total];
        doneNs = new long[(int) total];

        createTopics(bootstrap);
        try (Driver d = "spring".equals(mode) ? spring(bootstrap) : switchboard(bootstrap)) {
            long seq = 0;
            // Warm-up: 100 requests at 100/s, answers awaited, not reported.
            seq = offer(d, seq, 100, 1);
            waitAnswers(0, seq, 10_000);
            double knee = 0;
            boolean stopped = false; // a step did not hold (else the knee is only a lower bound)
            for (double rate : rates) {
                Map<String, Long> cpu0 = cpuTicks(cpuPids);
                long from = seq;
                seq = offer(d, seq, rate, stepSeconds);
                waitAnswers(from, seq, maxP99Ms + 500);
                Map<String, Long> cpu1 = cpuTicks(cpuPids);
                long[] lat = latenciesUs(from, seq);
                long n = seq - from;
                long ok = Arrays.stream(lat).filter(v -> v < Long.MAX_VALUE).count();
                long p50 = quantile(lat, 0.50);
                long p99 = quantile(lat, 0.99);
                boolean held = ok > 0 && p99 <= maxP99Ms * 1000;
                StringBuilder line = new StringBuilder(String.format(
                        "step mode=%s rate=%.0f sent=%d answered=%d achieved=%.1f p50_ms=%s p99_ms=%s held=%s",
                        mode, rate, n, ok, ok / (double) stepSeconds, ms(p50), ms(p99), held ? "yes" : "no"));
                for (String name : cpuPids.keySet()) {
                    Long a = cpu0.get(name);
                    Long b = cpu1.get(name);
                    if (a != null && b != null && ok > 0) {
                        line.append(String.format(" cpu_us.%s=%.1f", name, (b - a) * 1e6 / ticksPerSecond() / ok));
                    }
                }
                System.out.println(line);
                System.out.flush();
                if (stepUp && !held) {
                    stopped = true;
                    break;
                }
                knee = held ? rate : knee;
            }
            if (stepUp) {
                System.out.printf("knee mode=%s rate=%.0f%s%n", mode, knee, stopped ? "" : " bound=lower");
            }
        }
    }

    /** Creates the topics of --create-topics (comma-separated) that do not exist. */
    private void createTopics(String bootstrap) throws Exception {
        String names = opt.getOrDefault("create-topics", "");
        if (names.isBlank()) {
            return;
        }
        int partitions = Integer.parseInt(opt.getOrDefault("partitions", "6"));
        try (Admin a = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            for (String n : names.split(",")) {
                try {
                    a.createTopics(List.of(new NewTopic(n, partitions, (short) 1))).all().get();
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw e;
                    }
                }
            }
        }
    }

    /** Sends rate × seconds requests on an open-loop schedule. */
    private long offer(Driver d, long seq, double rate, int seconds) {
        long n = (long) Math.ceil(rate * seconds);
        long start = System.nanoTime();
        long first = seq;
        while (seq < first + n) {
            long due = (long) ((System.nanoTime() - start) / 1e9 * rate) + 1;
            while (seq < first + Math.min(due, n)) {
                String id = runId + "-" + seq;
                String payload = "{\"seq\":" + seq + ",\"pad\":\"" + payloadPad + "\"}";
                sentNs[(int) seq] = System.nanoTime();
                d.send(seq, id, payload);
                seq++;
            }
            LockSupport.parkNanos(200_000);
        }
        return seq;
    }

    private void done(long seq) {
        if (seq >= 0 && seq < doneNs.length && doneNs[(int) seq] == 0) {
            doneNs[(int) seq] = System.nanoTime();
            answered.incrementAndGet();
        }
    }

    private void waitAnswers(long from, long to, long waitMs) throws InterruptedException {
        long deadline = System.nanoTime() + waitMs * 1_000_000;
        while (System.nanoTime() < deadline) {
            boolean all = true;
            for (long s = from; s < to; s++) {
                if (doneNs[(int) s] == 0) {
                    all = false;
                    break;
                }
            }
            if (all) {
                return;
            }
            Thread.sleep(20);
        }
    }

    private long[] latenciesUs(long from, long to) {
        long[] out = new long[(int) (to - from)];
        for (long s = from; s < to; s++) {
            long d = doneNs[(int) s];
            out[(int) (s - from)] = d == 0 ? Long.MAX_VALUE : (d - sentNs[(int) s]) / 1000;
        }
        Arrays.sort(out);
        return out;
    }

    private static long quantile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return Long.MAX_VALUE;
        }
        return sorted[(int) Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
    }

    private static String ms(long us) {
        return us == Long.MAX_VALUE ? "inf" : String.format("%.2f", us / 1000.0);
    }

    private static long ticksPerSecond() {
        return 100; // USER_HZ on Linux
    }

    /** utime + stime of each process, in clock ticks (absent: gone). */
    private static Map<String, Long> cpuTicks(Map<String, Long> pids) {
        Map<String, Long> out = new LinkedHashMap<>();
        for (Map.Entry<String, Long> e : pids.entrySet()) {
            try {
                String stat = Files.readString(Path.of("/proc/" + e.getValue() + "/stat"));
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                out.put(e.getKey(), Long.parseLong(f[11]) + Long.parseLong(f[12]));
            } catch (IOException | RuntimeException ignored) {
                // the process is gone: no figure for it
            }
        }
        return out;
    }

    private Driver spring(String bootstrap) throws InterruptedException {
        String requests = need("request-topic");
        DefaultKafkaProducerFactory<String, String> pf = new DefaultKafkaProducerFactory<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class));
        // --isolation read_committed: the replies of a transactional
        // replier are read once committed, as Switchboard's results are.
        DefaultKafkaConsumerFactory<String, String> cf = new DefaultKafkaConsumerFactory<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.GROUP_ID_CONFIG, "peer-requester-" + runId,
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest",
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, opt.getOrDefault("isolation", "read_uncommitted"),
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class));
        KafkaMessageListenerContainer<String, String> replies =
                new KafkaMessageListenerContainer<>(cf, new ContainerProperties(need("reply-topic")));
        ReplyingKafkaTemplate<String, String, String> t = new ReplyingKafkaTemplate<>(pf, replies);
        t.setDefaultReplyTimeout(Duration.ofSeconds(30));
        t.setSharedReplyTopic(false);
        t.start();
        if (!t.waitForAssignment(Duration.ofSeconds(60))) {
            throw new IllegalStateException("the reply container was not assigned its topic within 60s");
        }
        return new Driver() {
            @Override
            public void send(long seq, String id, String payload) {
                RequestReplyFuture<String, String, String> f = t.sendAndReceive(new ProducerRecord<>(requests, id, payload));
                f.whenComplete((rec, err) -> {
                    if (err == null) {
                        done(seq);
                    }
                });
            }

            @Override
            public void close() {
                t.stop();
                t.destroy();
                pf.destroy();
            }
        };
    }

    private Driver switchboard(String bootstrap) throws InterruptedException {
        String requests = need("request-topic");
        String results = need("results-topic");
        String intentType = opt.getOrDefault("intent-type", "peer");
        KafkaProducer<String, String> p = new KafkaProducer<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class));
        KafkaConsumer<String, String> c = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false,
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class));
        CountDownLatch ready = new CountDownLatch(1);
        String prefix = runId + "-";
        Thread reader = new Thread(() -> {
            try {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : c.partitionsFor(results)) {
                    tps.add(new TopicPartition(results, pi.partition()));
                }
                c.assign(tps);
                c.seekToEnd(tps);
                tps.forEach(c::position); // resolve the end now: nothing sent after this is missed
                ready.countDown();
                while (true) {
                    for (ConsumerRecord<String, String> rec : c.poll(Duration.ofMillis(100))) {
                        String k = rec.key();
                        if (k != null && k.startsWith(prefix)) {
                            done(Long.parseLong(k.substring(prefix.length())));
                        }
                    }
                }
            } catch (WakeupException e) {
                // closing
            } finally {
                c.close();
            }
        }, "results-reader");
        reader.start();
        if (!ready.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the results reader was not positioned within 60s");
        }
        return new Driver() {
            @Override
            public void send(long seq, String id, String payload) {
                String v = "{\"intent_id\":\"" + id + "\",\"intent_type\":\"" + intentType + "\",\"payload\":" + payload + "}";
                p.send(new ProducerRecord<>(requests, id, v));
            }

            @Override
            public void close() {
                c.wakeup();
                try {
                    reader.join(10_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                p.close(Duration.ofSeconds(5));
            }
        };
    }
}
