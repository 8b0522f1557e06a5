//! AMQP groundwork against the real RabbitMQ at 127.0.0.1:5672 (`.ci/run`
//! starts it): connections over our TCP_NODELAY socket, redacted errors.

use amiquip::{
    AmqpProperties, ConsumerMessage, ConsumerOptions, Exchange, Publish, QueueDeclareOptions,
};
use mcpvisor::transport::amqp::{open, AmqpUrl};

const BROKER: &str = "amqp://guest:guest@127.0.0.1:5672";

#[test]
fn a_nodelay_connection_carries_a_round_trip() {
    let mut conn =
        open(&AmqpUrl::parse(BROKER).unwrap()).expect("the local RabbitMQ (see .ci/run)");
    let channel = conn.open_channel(None).unwrap();
    let queue = channel
        .queue_declare(
            "",
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..Default::default()
            },
        )
        .unwrap();
    let consumer = queue
        .consume(ConsumerOptions {
            no_ack: true,
            ..Default::default()
        })
        .unwrap();
    let exchange = Exchange::direct(&channel);
    for i in 0..100 {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#);
        let props = AmqpProperties::default().with_content_type("application/json".into());
        exchange
            .publish(Publish::with_properties(
                body.as_bytes(),
                queue.name(),
                props,
            ))
            .unwrap();
        match consumer
            .receiver()
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("delivery")
        {
            ConsumerMessage::Delivery(d) => {
                assert_eq!(
                    d.body,
                    body.as_bytes(),
                    "the body is the raw message, nothing else"
                );
                assert_eq!(
                    d.properties.content_type().as_deref(),
                    Some("application/json")
                );
            }
            other => panic!("{other:?}"),
        }
    }
    conn.close().unwrap();
}

#[test]
fn refused_credentials_are_not_echoed() {
    let url = AmqpUrl::parse("amqp://guest:not-the-password-42@127.0.0.1:5672").unwrap();
    let e = match open(&url) {
        Ok(_) => panic!("the broker accepted a wrong password"),
        Err(e) => e.to_string(),
    };
    assert!(!e.contains("not-the-password-42"), "{e}");
}
