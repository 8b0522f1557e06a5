//! Property tests: the wire types survive their round trips — whatever a
//! peer sends that we accept reads back the same after we write it.

use mcpvisor::jsonrpc::{self, Message, Parsed, Request, RequestId};
use mcpvisor::model::{Annotations, Completion, Content, Icon, ResourceContents};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Any JSON value, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-zA-Z0-9 _:/.\\-\u{e9}\u{1F600}\"\\\\]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_]{1,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-zA-Z_/.]{1,12}", json_value(), 0..6)
        .prop_map(|m| m.into_iter().collect())
}

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(|n| RequestId::from_value(&json!(n)).unwrap()),
        "[ -~]{0,16}".prop_map(|s| RequestId::from_value(&json!(s)).unwrap()),
    ]
}

/// Serializes to bytes and parses as a peer would.
fn over_the_wire(value: &Value) -> Result<Parsed, jsonrpc::ParseError> {
    jsonrpc::parse(&serde_json::to_vec(value).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn request_ids_round_trip(id in request_id()) {
        prop_assert_eq!(RequestId::from_value(&id.to_value()), Some(id));
    }

    #[test]
    fn requests_round_trip(id in request_id(), method in "[a-z]{1,8}(/[a-zA-Z_]{1,8})?", params in prop::option::of(object())) {
        let sent = Request::new(id, &method, params.map(Value::Object));
        match over_the_wire(&sent.clone().into_value()) {
            Ok(Parsed::Single(Message::Request(got))) => prop_assert_eq!(got, sent),
            other => prop_assert!(false, "{other:?}"),
        }
    }

    /// Whatever parses as a message (or batch member) serializes back to
    /// the same message.
    #[test]
    fn accepted_messages_round_trip(
        id in prop::option::of(json_value()),
        method in prop::option::of("[a-z/]{1,10}"),
        params in prop::option::of(json_value()),
        result in prop::option::of(json_value()),
        error in prop::option::of(json_value()),
    ) {
        let mut m = Map::new();
        m.insert("jsonrpc".into(), json!("2.0"));
        for (k, v) in [("id", id), ("method", method.map(Value::from)), ("params", params), ("result", result), ("error", error)] {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        }
        let value = Value::Object(m);
        let parsed = over_the_wire(&value);
        let again = |msg: &Message| {
            let object = match msg {
                Message::Request(r) => r.object(),
                Message::Notification(n) => n.object(),
                Message::Response(r) => r.object(),
            };
            jsonrpc::validate(Value::Object(object.clone()))
        };
        match parsed {
            Ok(Parsed::Single(msg)) => prop_assert_eq!(again(&msg), Ok(msg)),
            Ok(Parsed::Batch(_)) => prop_assert!(false, "an object parsed as a batch"),
            Err(e) => prop_assert!(!e.message.is_empty()),
        }
    }

    /// Content read leniently writes back to what reads the same again.
    #[test]
    fn content_round_trips(kind in "(text|image|audio|resource_link|resource|tool_use|tool_result|other)", fields in object()) {
        let mut v = fields;
        v.insert("type".into(), json!(kind));
        let once = Content::from_value(&Value::Object(v));
        prop_assert_eq!(Content::from_value(&once.to_value()), once);
    }

    #[test]
    fn resource_contents_round_trip(fields in object(), uri in "[a-z]{1,5}://[a-z/]{0,10}", text in prop::option::of("[ -~]{0,20}")) {
        let mut v = fields;
        v.insert("uri".into(), json!(uri));
        if let Some(t) = text {
            v.insert("text".into(), json!(t));
        }
        if let Some(once) = ResourceContents::from_value(&Value::Object(v)) {
            prop_assert_eq!(ResourceContents::from_value(&once.to_value()), Some(once));
        }
    }

    #[test]
    fn icons_annotations_and_completions_round_trip(v in object()) {
        let v = Value::Object(v);
        if let Some(icon) = Icon::from_value(&v) {
            prop_assert_eq!(Icon::from_value(&icon.to_value()), Some(icon));
        }
        let a = Annotations::from_value(&v);
        prop_assert_eq!(Annotations::from_value(&a.to_value()), a);
        if let Some(c) = Completion::from_value(&v) {
            prop_assert_eq!(Completion::from_value(&c.to_value()), Some(c));
        }
    }
}
