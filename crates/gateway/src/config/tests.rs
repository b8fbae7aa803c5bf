//! The configuration's own tests.

use super::*;

/// Reading `text` (as `t.toml`) and checking it report one problem starting with each of
/// `expected`, and no other.
fn exactly_these_problems(text: &str, expected: &[&str]) {
    let (config, origins, mut problems) = Config::read_toml(text, "t.toml");
    problems.extend(config.validate_from(&origins).unwrap_err());
    for expected in expected {
        assert!(problems.iter().any(|p| p.starts_with(expected)), "{expected} in {problems:#?}");
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

#[test]
fn issue_14_endpoints_are_not_doubled() {
    let cases = [
        (
            "http://h:1",
            UpstreamApi::OpenAi,
            "http://h:1/v1/chat/completions",
            "http://h:1/v1/models",
        ),
        (
            "http://h:1/v1/",
            UpstreamApi::OpenAi,
            "http://h:1/v1/chat/completions",
            "http://h:1/v1/models",
        ),
        (
            "http://h:1/v1/chat/completions",
            UpstreamApi::OpenAi,
            "http://h:1/v1/chat/completions",
            "http://h:1/v1/models",
        ),
        (
            "https://h/api/chat/completions?v=1",
            UpstreamApi::OpenAi,
            "https://h/api/chat/completions?v=1",
            "https://h/api/models?v=1",
        ),
        (
            "http://h:1/v1/messages",
            UpstreamApi::Anthropic,
            "http://h:1/v1/messages",
            "http://h:1/v1/models",
        ),
        ("http://h:1", UpstreamApi::Anthropic, "http://h:1/v1/messages", "http://h:1/v1/models"),
    ];
    for (url, api, endpoint, models) in cases {
        let (e, m) = endpoints(url, api).unwrap();
        assert_eq!((e.as_str(), m.as_str()), (endpoint, models), "{url}");
    }
    let err = endpoints("http://h:1/v1/messages", UpstreamApi::OpenAi).unwrap_err();
    assert!(err.contains("upstream.api") && err.contains("http://h:1/v1"), "{err}");
    assert!(endpoints("ftp://h", UpstreamApi::OpenAi).is_err());
    assert!(endpoints("not a url", UpstreamApi::OpenAi).is_err());
}

#[test]
fn every_problem_is_reported_with_its_key() {
    let (mut config, origins) = Config::from_toml(
        "listen = \"nope\"\nmax_retries = 99\n[upstream]\nurl = \"ftp://x\"\nidle_timeout_secs = 0",
        "t.toml",
    )
    .unwrap();
    config.drain_timeout_secs = -1.0;
    config.min_call_confidence = 1.5;
    let problems = config.validate_from(&origins).unwrap_err();
    assert!(problems.contains(&"listen: `nope` is not an address like 127.0.0.1:8080 or localhost:8080 (from t.toml line 1)".to_owned()), "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("upstream.idle_timeout_secs:")
                && p.ends_with("(from t.toml line 5)")),
        "{problems:?}"
    );
    for key in [
        "listen:",
        "upstream.url:",
        "upstream.idle_timeout_secs:",
        "max_retries:",
        "drain_timeout_secs:",
        "min_call_confidence: must be from 0 to 1, not 1.5",
    ] {
        assert!(problems.iter().any(|p| p.starts_with(key)), "{key} in {problems:?}");
    }
}

#[test]
fn unknown_keys_are_named() {
    let err = Config::from_toml("lisen = \"x\"", "t.toml").unwrap_err();
    assert!(err[0].starts_with("t.toml line 1: unknown key `lisen`"), "{err:?}");
}

#[test]
fn models_route_to_upstream_names_and_modes() {
    let (config, _) = Config::from_toml(
        "mode = \"emulate\"\n[upstream]\nurl = \"http://127.0.0.1:1\"\n[models.small]\nupstream = \"qwen2.5\"\nmode = \"native\"",
        "t.toml",
    )
    .unwrap();
    let route = |model| config.resolve(model).map(|r| (r.chain, r.mode));
    assert_eq!(route("small"), Some((vec![("default".into(), "qwen2.5".into())], Mode::Native)));
    assert_eq!(route("other"), Some((vec![("default".into(), "other".into())], Mode::Emulate)));
}

/// Issue 14: every problem of a file at once, each with its line: unknown keys at every
/// level, wrong types, a bad enum value, and a syntax error.
#[test]
fn issue_14_every_problem_in_a_file_is_reported_with_its_line() {
    let text = "listen = 8080\nmode = \"fast\"\nextra = 1\n[upstream]\nurl = \"http://h\"\ntimeout = 3\nidle_timeout_secs = \"x\"\n[models.a]\nmode = \"native\"\nformat = \"json\"\n[server]\nport = 1\n";
    let problems = Config::from_toml(text, "t.toml").unwrap_err();
    let lines: Vec<&str> = problems.iter().map(|p| p.split(':').next().unwrap()).collect();
    assert_eq!(
        lines,
        [
            "t.toml line 1",
            "t.toml line 2",
            "t.toml line 3",
            "t.toml line 6",
            "t.toml line 7",
            "t.toml line 10",
            "t.toml line 11"
        ],
        "{problems:#?}"
    );
    assert!(problems[0].contains("listen:") && problems[0].contains("string"), "{problems:?}");
    assert!(problems[1].contains("fast"), "{problems:?}");
    assert!(problems[5].contains("unknown key `models.a.format`"), "{problems:?}");
    let syntax = Config::from_toml("listen = \"a\"\nmode = \n", "t.toml").unwrap_err();
    assert!(syntax[0].starts_with("t.toml line 2:"), "{syntax:?}");
}

/// Issue 14: blank and padded keys from any source are refused, naming the source.
#[test]
fn issue_14_blank_or_padded_keys_are_refused_with_their_origin() {
    let env = Overrides::from_env(|name| (name == "TOOLSHIM_API_KEYS").then(|| " ".to_owned()));
    let mut config = Config {
        upstream: UpstreamConfig { url: "http://h".into(), ..UpstreamConfig::default() },
        ..Config::default()
    };
    let mut origins = Origins::default();
    config.apply(&env, &mut origins).unwrap();
    let problems = config.validate_from(&origins).unwrap_err();
    assert_eq!(
        problems,
        [
            "api_keys: the key is blank; a blank key would turn authentication off (from environment variable TOOLSHIM_API_KEYS)"
        ]
    );
    let env = Overrides::from_env(|name| (name == "TOOLSHIM_API_KEYS").then(|| "a, b".to_owned()));
    config.apply(&env, &mut origins).unwrap();
    let problems = config.validate_from(&origins).unwrap_err();
    assert!(problems[0].contains("key 2 of 2 has white space"), "{problems:?}");
    let flags = Overrides {
        layer: Layer::Flags,
        api_keys: Some(vec![String::new()]),
        ..Overrides::default()
    };
    config.apply(&flags, &mut origins).unwrap();
    assert!(config.validate_from(&origins).unwrap_err()[0].ends_with("(from flag --api-key)"));
    let (config, origins) =
        Config::from_toml("api_keys = [\"k\", \"\"]\n[upstream]\nurl = \"http://h\"", "t.toml")
            .unwrap();
    assert!(config.validate_from(&origins).unwrap_err()[0].ends_with("(from t.toml line 1)"));
}

/// Issue 14: the values of a file that could be read are checked even when others could
/// not, so every problem comes at once; a refused value is not reported twice.
#[test]
fn issue_14_a_file_with_unreadable_values_is_still_checked() {
    let text = "api_keys = [\"\"]\nmode = \"fast\"\n[upstream]\nurl = \"http://h\"\nconnect_timeout_secs = \"x\"\nidle_timeout_secs = -1\n";
    let (config, origins, mut problems) = Config::read_toml(text, "t.toml");
    problems.extend(config.validate_from(&origins).unwrap_err());
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for (problem, expected) in problems.iter().zip([
        "t.toml line 2: mode:",
        "t.toml line 5: upstream.connect_timeout_secs:",
        "upstream.idle_timeout_secs: must be a positive number of seconds, not -1 (from t.toml line 6)",
        "api_keys: the key is blank; a blank key would turn authentication off (from t.toml line 1)",
    ]) {
        assert!(problem.starts_with(expected), "{expected} in {problems:#?}");
    }
    // A value set again by a later layer is checked again.
    let (mut config, mut origins, _) = Config::read_toml("mode = \"fast\"\n", "t.toml");
    let env = Overrides::from_env(|name| (name == "TOOLSHIM_MODE").then(|| "native".into()));
    config.apply(&env, &mut origins).unwrap();
    assert_eq!(config.mode, Mode::Native);
    assert!(!origins.refused("mode"));
}

#[test]
fn issue_14_listen_takes_names_and_checks_ports() {
    assert!(listen_address("localhost:8080").is_ok());
    assert!(listen_address("[::1]:0").is_ok());
    assert!(listen_address("127.0.0.1:99999").unwrap_err().contains("no valid port"));
    assert!(listen_address("localhost").is_err());
    assert!(listen_address("bad host:1").is_err());
}

/// Issue 27: a malformed `[keys.NAME]` table is reported with its file and line.
#[test]
fn issue_27_a_malformed_key_table_names_the_file_and_line() {
    let text = "[upstream]\nurl = \"http://h\"\n[keys.alice]\nkey = \"sk-a\"\nrpm = \"ten\"\nrpmm = 3\n[keys.bob]\nrpm = 5\n[keys.carol]\nkey_env = \"TOOLSHIM_TEST_UNSET_KEY\"\n[keys.dave]\nkey = \"sk-a\"\n";
    exactly_these_problems(
        text,
        &[
            "t.toml line 5: keys.alice.rpm:",
            "t.toml line 6: unknown key `keys.alice.rpmm`; the keys here are: key, key_env,",
            "keys.bob.rpm: has no secret: set key, or key_env to a variable that holds it (from t.toml line 8)",
            "keys.carol.key_env: the variable TOOLSHIM_TEST_UNSET_KEY (key_env) is not set (from t.toml line 10)",
            "keys.dave.key: its secret is also keys.alice's; each key needs its own (from t.toml line 12)",
        ],
    );
    let (config, _) = Config::from_toml(
        "[keys.ci]\nkey = \"sk-ci\"\nmodels = [\"gpt-*\"]\nrpm = 60\ntpm = 1000\ntpd = 9000\nconcurrent = 2\nadmin = true\n",
        "t.toml",
    )
    .unwrap();
    let ci = &config.keys["ci"];
    assert_eq!((ci.rpm, ci.tpm, ci.tpd, ci.concurrent, ci.admin), (60, 1000, 9000, 2, true));
    assert_eq!(ci.models, ["gpt-*"]);
    assert!(config.auth_on());
}

/// Issue 27: `[inspect]` needs an admin key, and its bounds are checked, each problem with
/// its file and line.
#[test]
fn issue_27_the_inspector_needs_an_admin_key_and_sane_bounds() {
    let text = "[upstream]\nurl = \"http://h\"\n[keys.app]\nkey = \"sk-app\"\n[inspect]\nenabled = true\nrequests = 0\nmax_bytes = 10\nkept = 3\n";
    exactly_these_problems(
        text,
        &[
            "t.toml line 9: unknown key `inspect.kept`; the keys here are: enabled, requests, max_bytes",
            "inspect.enabled: the inspector shows prompts and replies, so it needs a key with admin = true in a [keys.NAME] table to read it (from t.toml line 6)",
            "inspect.requests: must be between 1 and 100000 (from t.toml line 7)",
            "inspect.max_bytes: must be at least 65536 (64 KiB) (from t.toml line 8)",
        ],
    );
    let text = "[upstream]\nurl = \"http://h\"\n[keys.ops]\nkey = \"sk-ops\"\nadmin = true\n[inspect]\nenabled = true\n";
    let (config, _) = Config::from_toml(text, "t.toml").unwrap();
    assert!(config.validate().is_ok());
    assert_eq!(config.inspect, InspectConfig { enabled: true, ..InspectConfig::default() });
}
