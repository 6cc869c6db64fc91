//! The cost of provenance per tool call: indexing a conversation of ~100 KB (a system
//! prompt, a user request, tool results of mixed text with addresses, URLs, IBANs) and
//! attributing a call's arguments (issue 36 target: below 1 ms per call at 100 KB).

use criterion::{Criterion, criterion_group, criterion_main};
use rampart_core::Role;
use rampart_provenance::{Conversation, Index, Message, Source};
use serde_json::json;
use std::hint::black_box;

fn tool_result(i: usize) -> String {
    format!(
        "Invoice {i} from Vendor {i} Ltd. Contact billing{i}@vendor{i}.example or call +44 20 7946 {:04}. \
         Pay to DE89 3704 0044 0532 0130 00 within 30 days. Details at https://vendor{i}.example/invoices/{i}?lang=en. \
         The quarterly report shows revenue growth across all regions, with the strongest results in \
         the northern markets and a small decline in the south. Files: /srv/share/invoices/{i}.pdf. ",
        i % 10_000
    )
}

fn bench(c: &mut Criterion) {
    let user = "Please pay the open invoices and send a summary to anna@home.example".to_string();
    let mut results = Vec::new();
    let mut total = 0;
    let mut i = 0;
    while total < 100_000 {
        let t = tool_result(i);
        total += t.len();
        results.push(t);
        i += 1;
    }
    let mut msgs = vec![
        Message::new(
            Role::System,
            Source::Trusted,
            "You are a finance assistant.",
        ),
        Message::new(Role::User, Source::Trusted, user.as_str()),
    ];
    msgs.extend(
        results
            .iter()
            .map(|t| Message::new(Role::Tool, Source::Untrusted, t.as_str())),
    );
    let args = json!({
        "iban": "DE89370400440532013000",
        "amount": 120.5,
        "to": "billing7@vendor7.example",
        "memo": "The quarterly report shows revenue growth across all regions"
    });
    c.bench_function("index_100kb_and_attribute", |b| {
        b.iter(|| {
            let index = Index::build(black_box(&msgs), &[]).unwrap_or_else(|e| panic!("{e}"));
            black_box(index.of_arguments(black_box(&args)))
        })
    });
    c.bench_function("of_call_100kb", |b| {
        b.iter(|| {
            Index::of_call(black_box(&msgs), &[], black_box(&args))
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    let no_text = json!({"iban": "DE89370400440532013000", "amount": 120.5, "to": "billing7@vendor7.example"});
    c.bench_function("of_call_100kb_no_free_text", |b| {
        b.iter(|| {
            Index::of_call(black_box(&msgs), &[], black_box(&no_text))
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    let index = Index::build(&msgs, &[]).unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("attribute_only_100kb", |b| {
        b.iter(|| black_box(index.of_arguments(black_box(&args))))
    });
    conversation(c, &user, &results);
}

/// What the service does per call: the request's messages (an agent that read one file per
/// tool result) read into a conversation, then the call attributed with document vouching.
fn conversation(c: &mut Criterion, user: &str, results: &[String]) {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a finance assistant."}),
        json!({"role": "user", "content": user}),
    ];
    // About 100 tool results of 1 KB (the bound is 100 tool results in 1 MiB).
    let docs: Vec<String> = results.chunks(3).map(|c| c.concat()).collect();
    for (i, t) in docs.iter().enumerate() {
        let args = json!({"path": format!("/srv/share/invoices/{i}.pdf")}).to_string();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function", "function": {"name": "read_file", "arguments": args}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": t}));
    }
    let messages = serde_json::Value::Array(messages);
    let documents = [("read_file".to_string(), "path".to_string())].into();
    c.bench_function("conversation_read_100kb", |b| {
        b.iter(|| {
            Conversation::from_messages(black_box(&messages)).unwrap_or_else(|e| panic!("{e}"))
        })
    });
    let conv = Conversation::from_messages(&messages).unwrap_or_else(|e| panic!("{e}"));
    let call = json!({"iban": "DE89370400440532013000", "amount": 120.5, "to": "billing7@vendor7.example"});
    c.bench_function("conversation_attribute_100kb_no_free_text", |b| {
        b.iter(|| {
            conv.attribute(black_box(&call), &[], &documents)
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    let with_text = json!({"to": "billing7@vendor7.example", "body": "The quarterly report shows revenue growth across all regions"});
    c.bench_function("conversation_attribute_100kb_free_text", |b| {
        b.iter(|| {
            conv.attribute(black_box(&with_text), &[], &documents)
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
