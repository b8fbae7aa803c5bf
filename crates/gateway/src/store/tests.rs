//! The store's contract, run against both backends: SQLite in memory, and a real
//! `redis-server` (Debian's `redis-server` package; `.ci/run` installs it) started on a free
//! loopback port for each test.

use serde_json::json;

use super::*;

fn memory(ttl_secs: u64, max_bytes: u64) -> Store {
    let config = StoreConfig { url: "memory".into(), ttl_secs, max_bytes };
    Store::open(&config).unwrap().unwrap()
}

/// A `redis-server` of its own, on a free port, stopped when dropped.
struct RedisServer {
    child: std::process::Child,
    url: String,
}

impl RedisServer {
    fn start() -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|err| {
                panic!("redis-server (Debian's redis-server package) cannot be started: {err}")
            });
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server did not listen on {port}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        RedisServer { child, url }
    }

    fn store(&self, ttl_secs: u64) -> Store {
        let config = StoreConfig { url: self.url.clone(), ttl_secs, max_bytes: 0 };
        Store::open(&config).unwrap().unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `contract` on each backend, naming it when it fails.
fn on_both(contract: impl Fn(&Store)) {
    contract(&memory(3600, 0));
    let redis = RedisServer::start();
    contract(&redis.store(3600));
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
    on_both(|store| {
        let owner = owner(Some("sk-a"));
        store.put(&owner, None, &[user("msg_u1", "hi")], &response("resp_1", "hello")).unwrap();
        store
            .put(&owner, Some("resp_1"), &[user("msg_u2", "and?")], &response("resp_2", "more"))
            .unwrap();
        let items = store.conversation(&owner, "resp_2").unwrap().unwrap();
        let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["msg_u1", "msg_resp_1", "msg_u2", "msg_resp_2"]);
        assert_eq!(
            store.item(&owner, "msg_resp_1").unwrap().unwrap()["content"][0]["text"],
            "hello"
        );
        let kept = store.get(&owner, "resp_2").unwrap().unwrap();
        assert_eq!(kept.previous.as_deref(), Some("resp_1"));
        assert_eq!(kept.input, [user("msg_u2", "and?")]);
    });
}

#[test]
fn issue_26_another_key_reads_nothing_and_a_delete_takes_the_items_too() {
    on_both(|store| {
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
    });
}

#[test]
fn issue_26_a_broken_chain_is_no_conversation() {
    on_both(|store| {
        let owner = owner(None);
        store.put(&owner, None, &[], &response("resp_1", "a")).unwrap();
        store.put(&owner, Some("resp_1"), &[], &response("resp_2", "b")).unwrap();
        store.delete(&owner, "resp_1").unwrap();
        assert!(store.conversation(&owner, "resp_2").unwrap().is_none());
    });
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
    let bad = StoreConfig { url: "ftp://example".into(), ..StoreConfig::default() };
    assert!(bad.problem().unwrap().contains("not a store"));
    assert!(Store::open(&bad).is_err());
    // A Redis that does not answer stops the start, naming it (without its password).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let down =
        StoreConfig { url: format!("redis://:secret@127.0.0.1:{port}"), ..StoreConfig::default() };
    assert!(down.problem().is_none());
    let err = Store::open(&down).unwrap_err().0;
    assert!(err.contains(&format!("127.0.0.1:{port}")) && !err.contains("secret"), "{err}");
}

#[test]
fn issue_26_conversations_keep_their_items_in_order_per_owner() {
    on_both(|store| {
        let (a, b) = (owner(Some("sk-a")), owner(Some("sk-b")));
        let created = store.new_conversation(&a, "conv_1", &json!({"k": "v"})).unwrap();
        assert!(store.add_items(&a, "conv_1", &[user("msg_1", "one")]).unwrap());
        assert_eq!(created["object"], "conversation");
        assert_eq!(created["metadata"], json!({"k": "v"}));
        assert!(store.conversation_object(&b, "conv_1").unwrap().is_none());
        assert!(!store.add_items(&b, "conv_1", &[user("msg_x", "x")]).unwrap());
        assert!(
            store.add_items(&a, "conv_1", &[user("msg_2", "two"), user("msg_3", "three")]).unwrap()
        );
        let ids = |store: &Store| -> Vec<String> {
            let items = store.conversation_items(&a, "conv_1").unwrap().unwrap();
            items.iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
        };
        assert_eq!(ids(store), ["msg_1", "msg_2", "msg_3"]);
        assert!(store.delete_conversation_item(&a, "conv_1", "msg_2").unwrap());
        assert!(!store.delete_conversation_item(&a, "conv_1", "msg_2").unwrap());
        assert_eq!(ids(store), ["msg_1", "msg_3"]);
        let updated = store.update_conversation(&a, "conv_1", &json!({"k": "w"})).unwrap().unwrap();
        assert_eq!(updated["metadata"], json!({"k": "w"}));
        assert!(store.update_conversation(&b, "conv_1", &json!({})).unwrap().is_none());
        assert!(!store.delete_conversation(&b, "conv_1").unwrap());
        assert!(store.delete_conversation(&a, "conv_1").unwrap());
        assert!(store.conversation_items(&a, "conv_1").unwrap().is_none());
        store.check().unwrap();
    });
}

#[test]
fn issue_26_a_response_past_its_ttl_is_gone() {
    let redis = RedisServer::start();
    for store in [memory(1, 0), redis.store(1)] {
        let owner = owner(None);
        store.put(&owner, None, &[user("msg_u", "hi")], &response("resp_1", "a")).unwrap();
        assert!(store.get(&owner, "resp_1").unwrap().is_some());
        std::thread::sleep(std::time::Duration::from_millis(2100));
        assert!(store.get(&owner, "resp_1").unwrap().is_none(), "{store:?}");
        assert!(store.item(&owner, "msg_u").unwrap().is_none(), "its items too: {store:?}");
        assert!(store.conversation(&owner, "resp_1").unwrap().is_none(), "{store:?}");
    }
}

#[test]
fn issue_26_a_shared_memory_recalls_what_it_was_told_until_its_time() {
    on_both(|store| {
        assert!(!store.recalls("refusal:Tools:default:m").unwrap());
        store.remember("refusal:Tools:default:m", 1).unwrap();
        assert!(store.recalls("refusal:Tools:default:m").unwrap());
        assert!(!store.recalls("refusal:Tools:default:other").unwrap());
    });
    let store = memory(3600, 0);
    store.remember("k", 1).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert!(!store.recalls("k").unwrap(), "past its time");
}

/// Issue 27: the counters behind key limits, in this process and in Redis, admit exactly
/// `rpm` requests of a key when threads race for them (Redis: one script per admission), and
/// count tokens and requests in flight alike.
#[test]
fn issue_27_counters_admit_exactly_the_limit_under_a_race_on_both() {
    let redis = RedisServer::start();
    let backends: Vec<Box<dyn counters::Counters>> =
        vec![counters::open("memory").unwrap(), counters::open(&redis.url).unwrap()];
    for backend in &backends {
        let limits = counters::Limits { rpm: 40, ..counters::Limits::default() };
        let admitted = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (backend, admitted) = (&backend, &admitted);
                scope.spawn(move || {
                    for i in 0..25 {
                        if backend.admit("k", &limits, &format!("l{t}-{i}")).unwrap().is_ok() {
                            admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.into_inner(), 40, "{}", backend.shown());
        let refused = backend.admit("k", &limits, "late").unwrap().unwrap_err();
        assert_eq!(refused.limit, "rpm");
        assert!((58_000..=60_000).contains(&refused.wait_ms), "{refused:?}");
        let limits = counters::Limits { tpd: 10, concurrent: 1, ..counters::Limits::default() };
        assert!(backend.admit("j", &limits, "a").unwrap().is_ok());
        assert_eq!(backend.admit("j", &limits, "b").unwrap().unwrap_err().limit, "concurrent");
        backend.release("j", "a").unwrap();
        backend.spend("j", 10).unwrap();
        assert_eq!(backend.admit("j", &limits, "c").unwrap().unwrap_err().limit, "tpd");
        let window = backend.window("j").unwrap();
        assert_eq!((window.tokens_today, window.tokens_this_minute, window.in_flight), (10, 10, 0));
        assert_eq!(backend.window("k").unwrap().requests_last_minute, 40);
    }
    assert_eq!(backends[1].shown(), redis.url);
}
