package io.switchboard.peer;

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
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.kafka.support.KafkaHeaders;

/**
 * The peer's server side: a plain replier that answers every request at
 * once with its own value, on the reply topic and with the correlation id
 * the ReplyingKafkaTemplate put on the request. A Spring listener container
 * and a KafkaTemplate, without Boot.
 *
 * <p>Usage: Replier BOOTSTRAP REQUEST_TOPIC GROUP_ID
 */
public final class Replier {
    private Replier() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 3) {
            System.err.println("usage: Replier BOOTSTRAP REQUEST_TOPIC GROUP_ID");
            System.exit(2);
        }
        String bootstrap = args[0];
        KafkaTemplate<String, String> template = new KafkaTemplate<>(new DefaultKafkaProducerFactory<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class)));
        ContainerProperties props = new ContainerProperties(args[1]);
        props.setGroupId(args[2]);
        props.setMessageListener((MessageListener<String, String>) (ConsumerRecord<String, String> rec) -> {
            Header replyTo = rec.headers().lastHeader(KafkaHeaders.REPLY_TOPIC);
            Header correlation = rec.headers().lastHeader(KafkaHeaders.CORRELATION_ID);
            if (replyTo == null || correlation == null) {
                return; // not a request-reply request
            }
            ProducerRecord<String, String> reply = new ProducerRecord<>(new String(replyTo.value()), rec.key(), rec.value());
            reply.headers().add(KafkaHeaders.CORRELATION_ID, correlation.value());
            template.send(reply);
        });
        KafkaMessageListenerContainer<String, String> container = new KafkaMessageListenerContainer<>(
                new DefaultKafkaConsumerFactory<>(Map.of(
                        ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                        ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")),
                props);
        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            container.stop();
            template.destroy();
            stop.countDown();
        }));
        container.start();
        System.out.println("replier: serving " + args[1]);
        stop.await();
    }
}
