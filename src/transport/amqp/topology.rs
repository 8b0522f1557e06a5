//! The broker objects mcpvisor declares, in one place:
//!
//! | object | kind | who declares | purpose |
//! |---|---|---|---|
//! | `mcp` | durable topic exchange | servers, clients | new sessions, by method-derived routing keys |
//! | `mcp.servers` | durable headers exchange, bound to `mcp` with the strategy's keys | servers | picks the logical server by the `mcp-server` header |
//! | `mcp.<server>.requests` | durable queue, shared, bound to `mcp.servers` with `mcp-server: <server>` | every instance of `<server>` | competing consumers: `initialize` spreads across instances |
//! | `mcp.<server>.instance.<id>` | exclusive, auto-delete queue | one instance | the later messages of every session that instance owns |
//! | `mcp.client.<id>` | exclusive, auto-delete queue | one client | responses, notifications and requests for that client |
//! | `mcp.dlx` / `mcp.dead-letters` | durable topic exchange / durable queue | servers | rejected (malformed) messages |
//!
//! Routing keys thus stay a function of the method alone (observers can bind
//! `mcp.request.tools.#` to `mcp`), while many logical servers share one
//! exchange without seeing each other's sessions.
//!
//! Directed messages (to an instance or a client queue) go through the
//! default exchange with the `mandatory` flag: when the queue is gone (its
//! owner died) the broker returns the message instead of dropping it.

use super::config::AmqpConfig;
use super::envelope::SERVER_HEADER;
use amiquip::{
    AmqpValue, Channel, Exchange, ExchangeDeclareOptions, ExchangeType, FieldTable,
    QueueDeclareOptions,
};

/// Queue argument naming the dead-letter exchange.
const DEAD_LETTER_ARGUMENT: &str = "x-dead-letter-exchange";

fn dead_lettering(config: &AmqpConfig) -> FieldTable {
    let mut args = FieldTable::new();
    args.insert(
        DEAD_LETTER_ARGUMENT.into(),
        AmqpValue::LongString(config.dead_letter_exchange.clone()),
    );
    args
}

/// A new random queue-name suffix (the session id generator's 128 bits).
pub(crate) fn unique_suffix() -> String {
    crate::protocol::new_session_id()
}

/// Declares a durable exchange of `kind` named `name`.
fn durable_exchange<'a>(
    channel: &'a Channel,
    kind: ExchangeType,
    name: String,
) -> amiquip::Result<Exchange<'a>> {
    channel.exchange_declare(
        kind,
        name,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
    )
}

/// Declares the topic exchange (both sides need it to exist before publishing).
pub(crate) fn declare_exchange(channel: &Channel, config: &AmqpConfig) -> amiquip::Result<()> {
    durable_exchange(channel, ExchangeType::Topic, config.exchange.clone()).map(drop)
}

/// Declares everything a server instance uses: the exchange, the dead-letter
/// exchange and queue, the shared request queue bound with the routing
/// strategy's keys, and the instance's own queue `instance_queue`.
pub(crate) fn declare_server(
    channel: &Channel,
    config: &AmqpConfig,
    instance_queue: &str,
) -> amiquip::Result<()> {
    declare_exchange(channel, config)?;
    let dlx = durable_exchange(
        channel,
        ExchangeType::Topic,
        config.dead_letter_exchange.clone(),
    )?;
    let dead = channel.queue_declare(
        config.dead_letter_queue.clone(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
    )?;
    dead.bind(&dlx, "#", FieldTable::new())?;
    let shared = channel.queue_declare(
        config.request_queue(),
        QueueDeclareOptions {
            durable: true,
            arguments: dead_lettering(config),
            ..Default::default()
        },
    )?;
    let servers = config.servers_exchange();
    durable_exchange(channel, ExchangeType::Headers, servers.clone())?;
    for key in config.routing.binding_keys() {
        channel.exchange_bind(
            servers.clone(),
            config.exchange.clone(),
            key,
            FieldTable::new(),
        )?;
    }
    let mut by_name = FieldTable::new();
    by_name.insert("x-match".into(), AmqpValue::LongString("all".into()));
    by_name.insert(
        SERVER_HEADER.into(),
        AmqpValue::LongString(config.server_name.clone()),
    );
    channel.queue_bind(shared.name(), servers, "", by_name)?;
    declare_private(channel, config, instance_queue)
}

/// Declares a queue only its declaring connection consumes (an instance's
/// or a client's), deleted by the broker when that connection ends.
pub(crate) fn declare_private(
    channel: &Channel,
    config: &AmqpConfig,
    name: &str,
) -> amiquip::Result<()> {
    channel.queue_declare(
        name,
        QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            arguments: dead_lettering(config),
            ..Default::default()
        },
    )?;
    Ok(())
}
