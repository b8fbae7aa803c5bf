use serde_json::json;

use super::*;

fn memory(ttl_secs: u64, max_bytes: u64) -> Store {
    let config = StoreConfig { url: "memory".into(), ttl_secs, max_bytes };
    Store::open(&config).unwrap().unwrap()
}

fn response(id: &str, text: &str) -> Value {
    json!({"id": id, "object": "response", "output": [
        {"id": format!("msg_{id}"), "type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": text}]}]})
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "type": "message", "role": "user", "content": text})
}

#[test]
fn issue_26_a_chain_of_responses_is_one_conversation_oldest_first() {
    let store = memory(3600, 0);
    let owner = owner(Some("sk-a"));
    store.put(&owner, None, &[user("msg_u1", "hi")], &response("resp_1", "hello")).unwrap();
    store
        .put(&owner, Some("resp_1"), &[user("msg_u2", "and?")], &response("resp_2", "more"))
        .unwrap();
    let items = store.conversation(&owner, "resp_2").unwrap().unwrap();
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["msg_u1", "msg_resp_1", "msg_u2", "msg_resp_2"]);
    assert_eq!(store.item(&owner, "msg_resp_1").unwrap().unwrap()["content"][0]["text"], "hello");
    let kept = store.get(&owner, "resp_2").unwrap().unwrap();
    assert_eq!(kept.previous.as_deref(), Some("resp_1"));
    assert_eq!(kept.input, [user("msg_u2", "and?")]);
}

#[test]
fn issue_26_another_key_reads_nothing_and_a_delete_takes_the_items_too() {
    let store = memory(3600, 0);
    let (a, b) = (owner(Some("sk-a")), owner(Some("sk-b")));
    assert_ne!(a, b);
    assert_eq!(owner(None), owner(Some("")), "no key is the empty key");
    store.put(&a, None, &[user("msg_u1", "hi")], &response("resp_1", "hello")).unwrap();
    assert!(store.get(&b, "resp_1").unwrap().is_none());
    assert!(store.item(&b, "msg_resp_1").unwrap().is_none());
    assert!(!store.delete(&b, "resp_1").unwrap());
    assert!(store.delete(&a, "resp_1").unwrap());
    assert!(store.get(&a, "resp_1").unwrap().is_none());
    assert!(store.item(&a, "msg_resp_1").unwrap().is_none(), "its items went with it");
    assert!(store.item(&a, "msg_u1").unwrap().is_none());
}

#[test]
fn issue_26_a_broken_chain_is_no_conversation() {
    let store = memory(3600, 0);
    let owner = owner(None);
    store.put(&owner, None, &[], &response("resp_1", "a")).unwrap();
    store.put(&owner, Some("resp_1"), &[], &response("resp_2", "b")).unwrap();
    store.delete(&owner, "resp_1").unwrap();
    assert!(store.conversation(&owner, "resp_2").unwrap().is_none());
}

#[test]
fn issue_26_past_the_size_cap_the_oldest_go_first() {
    let one = (response("resp_0", "x").to_string().len() + 2) as u64;
    let store = memory(0, one * 3);
    let owner = owner(None);
    for i in 0..5 {
        store.put(&owner, None, &[], &response(&format!("resp_{i}"), "x")).unwrap();
    }
    let kept: Vec<bool> =
        (0..5).map(|i| store.get(&owner, &format!("resp_{i}")).unwrap().is_some()).collect();
    assert_eq!(kept, [false, false, true, true, true]);
}

#[test]
fn issue_26_a_file_store_keeps_its_responses_across_opens() {
    let dir = std::env::temp_dir().join(format!("toolshim-store-{}", fastrand::u64(..)));
    let path = dir.join("nested").join("responses.db");
    let config =
        StoreConfig { url: format!("sqlite:{}", path.display()), ttl_secs: 3600, max_bytes: 0 };
    let owner = owner(Some("k"));
    {
        let store = Store::open(&config).unwrap().unwrap();
        store.put(&owner, None, &[], &response("resp_1", "kept")).unwrap();
    }
    let store = Store::open(&config).unwrap().unwrap();
    let kept = store.get(&owner, "resp_1").unwrap().unwrap();
    assert_eq!(kept.response["output"][0]["content"][0]["text"], "kept");
    store.check().unwrap();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn issue_26_off_is_no_store_and_a_bad_url_says_so() {
    let off = StoreConfig { url: "off".into(), ..StoreConfig::default() };
    assert!(Store::open(&off).unwrap().is_none());
    let bad = StoreConfig { url: "redis://127.0.0.1:1".into(), ..StoreConfig::default() };
    assert!(bad.problem().unwrap().contains("not a store"));
    assert!(Store::open(&bad).unwrap_err().0.contains("store.url"));
}
