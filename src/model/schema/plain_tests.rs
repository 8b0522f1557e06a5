use super::*;
use proptest::prelude::*;
use serde_json::json;

fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let node = Node::compile_root(schema).expect("a plain schema");
    let mut errors = Errors::new();
    node.check(instance, &Path::Root, &mut errors);
    errors.messages
}

#[test]
fn the_echo_schema_is_plain_and_says_what_is_wrong_and_where() {
    let schema = json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
    assert!(errors(&schema, &json!({"message": "hi"})).is_empty());
    assert_eq!(
        errors(&schema, &json!({})),
        ["\"message\" is a required property"]
    );
    assert_eq!(
        errors(&schema, &json!({"message": 5})),
        ["/message: 5 is not of type string"]
    );
    let nested = json!({"properties": {"a/b": {"items": {"type": "integer"}}}});
    assert_eq!(
        errors(&nested, &json!({"a/b": [1, 2.5]})),
        ["/a~1b/1: 2.5 is not of type integer"]
    );
}

#[test]
fn anything_it_does_not_take_goes_to_the_full_validator() {
    for schema in [
        json!({"type": "string", "pattern": "^a"}),
        json!({"type": "string", "format": "email"}),
        json!({"$ref": "#/$defs/a", "$defs": {"a": true}}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
        json!({"properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}}),
        json!({"type": "strin"}),
        json!({"type": ["string", "string"]}),
        json!({"type": []}),
        json!({"minLength": -1}),
        json!({"minLength": 1.5}),
        json!({"required": ["a", "a"]}),
        json!({"required": ["a", 1]}),
        json!({"anyOf": []}),
        json!({"items": [true]}),
        json!({"title": 5}),
        json!({"x-custom": 1}),
        json!("object"),
    ] {
        assert!(Node::compile_root(&schema).is_none(), "{schema}");
    }
    let declared =
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"});
    assert!(Node::compile_root(&declared).is_some());
}

#[test]
fn numbers_compare_by_value_across_integers_and_floats() {
    assert!(equal(&json!(1), &json!(1.0)));
    assert!(equal(&json!({"a": [1]}), &json!({"a": [1.0]})));
    assert!(!equal(&json!(u64::MAX), &json!(1.8446744073709552e19)));
    assert!(
        errors(
            &json!({"maximum": 9007199254740992u64}),
            &json!(9007199254740993u64)
        )
        .len()
            == 1
    );
    assert!(errors(&json!({"exclusiveMinimum": 0.5}), &json!(1)).is_empty());
    assert!(errors(&json!({"type": "integer"}), &json!(2.0)).is_empty());
    assert_eq!(
        errors(&json!({"minLength": 2}), &json!("é")),
        ["\"é\" has fewer than 2 characters"]
    );
}

// Both validators agree on every schema the fast path takes.

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(1)),
        Just(json!(1.0)),
        Just(json!(-1)),
        Just(json!(2.5)),
        Just(json!(3)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1e300)),
        Just(json!(9007199254740993u64)),
        Just(json!(9007199254740992.0)),
    ]
}

fn instance() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        prop_oneof![Just(""), Just("a"), Just("ab"), Just("héllo")].prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop_oneof![Just("a"), Just("b"), Just("c")], inner, 0..4)
                .prop_map(|m| json!(m)),
        ]
    })
}

fn type_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "null", "boolean", "object", "array", "number", "string", "integer",
    ])
}

fn keyword_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        type_name().prop_map(|t| json!({"type": t})),
        (type_name(), type_name())
            .prop_filter("distinct", |(a, b)| a != b)
            .prop_map(|(a, b)| json!({"type": [a, b]})),
        prop::collection::vec(instance(), 1..3).prop_map(|v| json!({"enum": v})),
        instance().prop_map(|v| json!({"const": v})),
        (0u64..4).prop_map(|n| json!({"minLength": n})),
        (0u64..4).prop_map(|n| json!({"maxLength": n})),
        (0u64..3).prop_map(|n| json!({"minItems": n, "maxProperties": n})),
        (0u64..3).prop_map(|n| json!({"maxItems": n, "minProperties": n})),
        (
            number(),
            prop::sample::select(vec![
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum"
            ])
        )
            .prop_map(|(n, k)| json!({ k: n })),
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 0..3).prop_map(|mut r| {
            r.sort();
            r.dedup();
            json!({"required": r, "description": "d"})
        }),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![any::<bool>().prop_map(Value::Bool), keyword_leaf()];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (
                prop::sample::select(vec!["a", "b"]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(
                    |(k, s, extra)| json!({"properties": { k: s }, "additionalProperties": extra})
                ),
            inner
                .clone()
                .prop_map(|s| json!({"type": "array", "items": s})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"anyOf": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"oneOf": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"allOf": v})),
            inner.clone().prop_map(|s| json!({"not": s})),
            (keyword_leaf(), inner).prop_map(|(mut a, b)| {
                if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
                    for (k, v) in b {
                        a.entry(k.clone()).or_insert(v.clone());
                    }
                }
                a
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn agrees_with_the_full_validator(schema in schema(), instances in prop::collection::vec(instance(), 1..6)) {
        let node = Node::compile_root(&schema).expect("every generated schema is plain");
        let full = jsonschema::validator_for(&schema).expect("a plain schema is a valid schema");
        for instance in &instances {
            let mut errors = Errors::new();
            node.check(instance, &Path::Root, &mut errors);
            prop_assert_eq!(errors.is_empty(), full.is_valid(instance), "{} against {}: {:?}", instance, schema, errors.messages);
            prop_assert_eq!(errors.is_empty(), errors.messages.is_empty());
        }
    }
}
