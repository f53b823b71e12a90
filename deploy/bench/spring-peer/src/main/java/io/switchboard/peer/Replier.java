package io.switchboard.peer;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.BatchMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.kafka.transaction.KafkaTransactionManager;

/**
 * The peer's server side: a plain replier that answers every request at
 * once with its own value, on the reply topic and with the correlation id
 * the ReplyingKafkaTemplate put on the request. A Spring listener container
 * and a KafkaTemplate, without Boot.
 *
 * <p>With {@code transactional}, Spring's exactly-once: the container reads
 * read_committed and runs each poll's batch in a Kafka transaction
 * (KafkaTransactionManager), the replies and the batch's offsets committed
 * together; the Java client speaks the brokers' transaction protocol v2
 * (KIP-890) when they have it finalized.
 *
 * <p>Usage: Replier BOOTSTRAP REQUEST_TOPIC GROUP_ID [transactional]
 */
public final class Replier {
    private Replier() {}

    public static void main(String[] args) throws InterruptedException {
        boolean tx = args.length == 4 && "transactional".equals(args[3]);
        if (args.length != 3 && !tx) {
            System.err.println("usage: Replier BOOTSTRAP REQUEST_TOPIC GROUP_ID [transactional]");
            System.exit(2);
        }
        String bootstrap = args[0];
        DefaultKafkaProducerFactory<String, String> pf = new DefaultKafkaProducerFactory<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class));
        Map<String, Object> consumer = new HashMap<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"));
        ContainerProperties props = new ContainerProperties(args[1]);
        props.setGroupId(args[2]);
        KafkaTemplate<String, String> template;
        if (tx) {
            pf.setTransactionIdPrefix(args[2] + ".tx-");
            template = new KafkaTemplate<>(pf);
            consumer.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            consumer.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            props.setKafkaAwareTransactionManager(new KafkaTransactionManager<>(pf));
            props.setMessageListener((BatchMessageListener<String, String>) (List<ConsumerRecord<String, String>> recs) -> {
                for (ConsumerRecord<String, String> rec : recs) {
                    reply(template, rec);
                }
            });
        } else {
            template = new KafkaTemplate<>(pf);
            props.setMessageListener((MessageListener<String, String>) rec -> reply(template, rec));
        }
        KafkaMessageListenerContainer<String, String> container = new KafkaMessageListenerContainer<>(
                new DefaultKafkaConsumerFactory<>(consumer), props);
        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            container.stop();
            template.destroy();
            stop.countDown();
        }));
        container.start();
        System.out.println("replier: serving " + args[1] + (tx ? " in transactions" : ""));
        stop.await();
    }

    /** reply answers a ReplyingKafkaTemplate request with its own value. */
    private static void reply(KafkaTemplate<String, String> template, ConsumerRecord<String, String> rec) {
        Header replyTo = rec.headers().lastHeader(KafkaHeaders.REPLY_TOPIC);
        Header correlation = rec.headers().lastHeader(KafkaHeaders.CORRELATION_ID);
        if (replyTo == null || correlation == null) {
            return; // not a request-reply request
        }
        ProducerRecord<String, String> reply = new ProducerRecord<>(new String(replyTo.value()), rec.key(), rec.value());
        reply.headers().add(KafkaHeaders.CORRELATION_ID, correlation.value());
        template.send(reply);
    }
}
