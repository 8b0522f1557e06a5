//! Property tests: the wire types survive their round trips — whatever a
//! peer sends that we accept reads back the same after we write it.

use mcpvisor::jsonrpc::{self, Message, Parsed, Request, RequestId};
use mcpvisor::model::{Annotations, Completion, Content, Icon, ResourceContents, ToolResult};
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

/// `known` members (each present or not, a likely value or any JSON),
/// plus up to 3 members of its own.
fn with_members(known: Vec<(&'static str, BoxedStrategy<Value>)>) -> impl Strategy<Value = Value> {
    let members: Vec<_> = known
        .into_iter()
        .map(|(k, likely)| {
            prop::option::of(prop_oneof![4 => likely, 1 => json_value()])
                .prop_map(move |v| v.map(|v| (k.to_owned(), v)))
        })
        .collect();
    (
        members,
        prop::collection::btree_map("x[a-z]{1,6}", json_value(), 0..3),
    )
        .prop_map(|(known, extra)| {
            let mut m: Map<String, Value> = extra.into_iter().collect();
            m.extend(known.into_iter().flatten());
            Value::Object(m)
        })
}

fn text() -> BoxedStrategy<Value> {
    "[ -~\u{e9}]{0,16}".prop_map(Value::from).boxed()
}

fn annotations() -> impl Strategy<Value = Value> {
    with_members(vec![
        (
            "audience",
            prop::collection::vec(
                prop_oneof![Just(json!("user")), Just(json!("assistant"))],
                0..3,
            )
            .prop_map(Value::from)
            .boxed(),
        ),
        ("priority", (0.0f64..=1.0).prop_map(Value::from).boxed()),
        ("lastModified", Just(json!("2025-01-12T15:00:58Z")).boxed()),
    ])
}

fn icon() -> impl Strategy<Value = Value> {
    with_members(vec![
        ("src", text()),
        (
            "mimeType",
            prop_oneof![Just(json!("image/png")), Just(json!("image/svg+xml"))].boxed(),
        ),
        (
            "sizes",
            prop::collection::vec(prop_oneof![Just(json!("48x48")), Just(json!("any"))], 0..3)
                .prop_map(Value::from)
                .boxed(),
        ),
        (
            "theme",
            prop_oneof![Just(json!("light")), Just(json!("dark"))].boxed(),
        ),
    ])
}

fn completion() -> impl Strategy<Value = Value> {
    with_members(vec![
        (
            "values",
            prop::collection::vec(text(), 0..4)
                .prop_map(Value::from)
                .boxed(),
        ),
        ("total", any::<u32>().prop_map(Value::from).boxed()),
        ("hasMore", any::<bool>().prop_map(Value::from).boxed()),
    ])
}

fn resource_contents() -> impl Strategy<Value = Value> {
    with_members(vec![
        (
            "uri",
            "[a-z]{1,5}://[a-z/]{0,10}".prop_map(Value::from).boxed(),
        ),
        ("mimeType", Just(json!("text/plain")).boxed()),
        ("text", text()),
        ("blob", "[A-Za-z0-9+/]{0,12}".prop_map(Value::from).boxed()),
        ("_meta", object().prop_map(Value::Object).boxed()),
    ])
}

fn content() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        Just("text"),
        Just("image"),
        Just("audio"),
        Just("resource_link"),
        Just("resource"),
        Just("tool_use"),
        Just("tool_result"),
        Just("other")
    ];
    let body = with_members(vec![
        ("text", text()),
        ("data", "[A-Za-z0-9+/]{0,12}".prop_map(Value::from).boxed()),
        ("mimeType", Just(json!("image/png")).boxed()),
        (
            "uri",
            "[a-z]{1,5}://[a-z/]{0,10}".prop_map(Value::from).boxed(),
        ),
        ("name", text()),
        ("resource", resource_contents().boxed()),
        ("annotations", annotations().boxed()),
        ("_meta", object().prop_map(Value::Object).boxed()),
        ("id", text()),
        ("input", object().prop_map(Value::Object).boxed()),
        ("toolUseId", text()),
        (
            "content",
            prop::collection::vec(json_value(), 0..2)
                .prop_map(Value::from)
                .boxed(),
        ),
    ]);
    (kind, body).prop_map(|(kind, mut body)| {
        body["type"] = json!(kind);
        body
    })
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

    /// Content read leniently writes back to what reads the same again:
    /// each kind with its members (of the right types or not), plus
    /// members of its own.
    #[test]
    fn content_round_trips(v in content()) {
        let once = Content::from_value(&v);
        prop_assert_eq!(Content::from_value(&once.to_value()), once);
    }

    /// A tool's result written from its typed form is the text its JSON
    /// value has (members in name order), whatever its blocks.
    #[test]
    fn typed_tool_results_are_written_as_their_values(
        blocks in prop::collection::vec(content(), 0..4),
        is_error in any::<bool>(),
        structured in prop::option::of(object()),
        meta in object(),
    ) {
        let result = ToolResult {
            content: blocks.iter().map(Content::from_value).collect(),
            structured_content: structured.clone().map(Value::Object),
            is_error,
            meta: meta.clone(),
        };
        let mut expected = Map::new();
        expected.insert(
            "content".into(),
            Value::Array(result.content.iter().map(Content::to_value).collect()),
        );
        if is_error {
            expected.insert("isError".into(), Value::Bool(true));
        }
        if let Some(s) = structured {
            expected.insert("structuredContent".into(), Value::Object(s));
        }
        if !meta.is_empty() {
            expected.insert("_meta".into(), Value::Object(meta));
        }
        let expected = Value::Object(expected);
        let text = serde_json::to_string(&result).unwrap();
        prop_assert_eq!(&text, &expected.to_string());
        prop_assert_eq!(result.to_value(), expected);
    }

    #[test]
    fn resource_contents_round_trip(v in resource_contents()) {
        if let Some(once) = ResourceContents::from_value(&v) {
            prop_assert_eq!(ResourceContents::from_value(&once.to_value()), Some(once));
        }
    }

    #[test]
    fn icons_round_trip(v in icon()) {
        if let Some(icon) = Icon::from_value(&v) {
            prop_assert_eq!(Icon::from_value(&icon.to_value()), Some(icon));
        }
    }

    #[test]
    fn annotations_round_trip(v in annotations()) {
        let a = Annotations::from_value(&v);
        prop_assert_eq!(Annotations::from_value(&a.to_value()), a);
    }

    #[test]
    fn completions_round_trip(v in completion()) {
        if let Some(c) = Completion::from_value(&v) {
            prop_assert_eq!(Completion::from_value(&c.to_value()), Some(c));
        }
    }
}
