//! Reading a TOML file into the configuration: every known key set, every problem reported
//! with its line.

use super::*;

/// `match $field { "name" => $target.name = value($item)?, …, _ => return Ok(false) }`: each
/// named key read into the field of its name.
macro_rules! set {
    ($target:expr, $field:expr, $item:expr; $($name:ident),+ $(,)?) => {
        match $field {
            $(stringify!($name) => $target.$name = value($item)?,)+
            _ => return Ok(false),
        }
    };
}

/// Sets one key of an upstream's endpoint table; `Ok(false)` for a key that does not exist.
fn upstream_field(
    upstream: &mut UpstreamConfig,
    field: &str,
    item: &toml::Spanned<toml::de::DeValue<'_>>,
) -> Result<bool, String> {
    set!(upstream, field, item; url, api, api_key_env, connect_timeout_secs,
        first_byte_timeout_secs, idle_timeout_secs, max_reply_bytes, max_line_bytes,
        probe_timeout_secs, error_body_timeout_secs, constrain, prefill);
    Ok(true)
}

/// Walks a TOML document, setting each known key and reporting every problem with its line.
pub(super) struct Walk<'a, 'p> {
    pub(super) path: &'a str,
    pub(super) line_of: &'a dyn Fn(usize) -> usize,
    pub(super) config: &'a mut Config,
    pub(super) origins: &'a mut Origins,
    pub(super) problems: &'p mut Vec<String>,
}

/// The keys a config file may have at each level.
const TOP_KEYS: &str = "listen, api_keys, mode, call_format, reasoning_calls, default_upstream, native_refusal_secs, max_retries, check_arguments, native_repair, continue_calls, check_grounding, min_call_confidence, body_limit_bytes, drain_timeout_secs, max_connections, header_read_timeout_secs, body_read_timeout_secs, keep_alive_timeout_secs, stream_keepalive_secs, readyz_cache_secs, [upstream], [upstreams.NAME], [models.NAME], [store], [keys.NAME], [traces], [inspect]";
const STORE_KEYS: &str = "url, ttl_secs, max_bytes";
const UPSTREAM_KEYS: &str = "url, api, api_key_env, connect_timeout_secs, first_byte_timeout_secs, idle_timeout_secs, max_reply_bytes, max_line_bytes, probe_timeout_secs, error_body_timeout_secs, constrain, prefill";
const MODEL_KEYS: &str = "upstream, mode, call_format, reasoning_calls, format_file";
const NAMED_UPSTREAM_KEYS: &str = "url, api, api_key_env, connect_timeout_secs, first_byte_timeout_secs, idle_timeout_secs, max_reply_bytes, max_line_bytes, probe_timeout_secs, error_body_timeout_secs, constrain, prefill, mode, call_format, models, aliases, model, fallback";

fn value<T: serde::de::DeserializeOwned>(
    value: &toml::Spanned<toml::de::DeValue<'_>>,
) -> Result<T, String> {
    T::deserialize(toml::de::ValueDeserializer::from(value.clone()))
        .map_err(|err| err.message().trim().to_owned())
}

impl Walk<'_, '_> {
    pub(super) fn table(&mut self, table: &toml::de::DeTable<'_>, at: &mut Vec<String>) {
        for (key, item) in table {
            at.push(key.get_ref().to_string());
            let line = (self.line_of)(key.span().start);
            let dotted = at.join(".");
            let parts: Vec<&str> = at.iter().map(String::as_str).collect();
            let table = matches!(
                parts.as_slice(),
                ["upstream"]
                    | ["store"]
                    | ["models"]
                    | ["models", _]
                    | ["upstreams"]
                    | ["upstreams", _]
                    | ["upstreams", _, "aliases"]
                    | ["keys"]
                    | ["keys", _]
                    | ["traces"]
                    | ["inspect"]
            );
            match (table, item.get_ref()) {
                (true, toml::de::DeValue::Table(inner)) => self.table(inner, at),
                (true, _) => {
                    self.origins.refused.insert(dotted.clone());
                    self.problems
                        .push(format!("{} line {line}: {dotted}: must be a table", self.path));
                }
                _ => match self.leaf(&parts, item) {
                    Ok(true) => {
                        let origin = Origin::File { path: self.path.to_owned(), line };
                        self.origins.set(&dotted, origin);
                    }
                    Ok(false) => {
                        let keys = match parts.first() {
                            Some(&"upstream") => UPSTREAM_KEYS,
                            Some(&"store") => STORE_KEYS,
                            Some(&"models") => MODEL_KEYS,
                            Some(&"upstreams") => NAMED_UPSTREAM_KEYS,
                            Some(&"keys") => super::keys::KEY_KEYS,
                            Some(&"traces") => "endpoint, service_name",
                            Some(&"inspect") => super::inspect::INSPECT_KEYS,
                            _ => TOP_KEYS,
                        };
                        self.unknown(&dotted, line, keys);
                    }
                    Err(message) => {
                        self.origins.refused.insert(dotted.clone());
                        self.problems
                            .push(format!("{} line {line}: {dotted}: {message}", self.path));
                    }
                },
            }
            at.pop();
        }
    }

    fn unknown(&mut self, key: &str, line: usize, keys: &str) {
        self.problems.push(format!(
            "{} line {line}: unknown key `{key}`; the keys here are: {keys}",
            self.path
        ));
    }

    /// Sets one value; `Ok(false)` for a key that does not exist.
    fn leaf(
        &mut self,
        key: &[&str],
        item: &toml::Spanned<toml::de::DeValue<'_>>,
    ) -> Result<bool, String> {
        let config = &mut *self.config;
        match key {
            ["default_upstream"] => config.default_upstream = Some(value(item)?),
            ["upstream", field] => return upstream_field(&mut config.upstream, field, item),
            [key] => set!(config, *key, item; listen, api_keys, mode, call_format,
                reasoning_calls, max_retries, check_arguments, native_repair, continue_calls,
                check_grounding, min_call_confidence, body_limit_bytes, drain_timeout_secs,
                max_connections,
                header_read_timeout_secs, body_read_timeout_secs, keep_alive_timeout_secs,
                stream_keepalive_secs, readyz_cache_secs, native_refusal_secs),
            ["store", key] => set!(config.store, *key, item; url, ttl_secs, max_bytes),
            ["traces", key] => set!(config.traces, *key, item; endpoint, service_name),
            ["inspect", key] => set!(config.inspect, *key, item; enabled, requests, max_bytes),
            ["keys", name, field] => {
                let key = config.keys.entry((*name).to_owned()).or_default();
                set!(key, *field, item; key, key_env, models, rpm, tpm, tpd, concurrent, admin);
            }
            ["upstreams", name, "aliases", client] => {
                let upstream = config.upstreams.entry((*name).to_owned()).or_default();
                upstream.aliases.insert((*client).to_owned(), value(item)?);
            }
            ["upstreams", name, field] => {
                let upstream = config.upstreams.entry((*name).to_owned()).or_default();
                match *field {
                    "mode" => upstream.mode = Some(value(item)?),
                    "call_format" => upstream.call_format = Some(value(item)?),
                    "models" => upstream.models = value(item)?,
                    "model" => upstream.model = Some(value(item)?),
                    "fallback" => upstream.fallback = value(item)?,
                    _ => return upstream_field(&mut upstream.upstream, field, item),
                }
            }
            ["models", name, field] => {
                let model = config.models.entry((*name).to_owned()).or_default();
                match *field {
                    "upstream" => model.upstream = Some(value(item)?),
                    "mode" => model.mode = Some(value(item)?),
                    "call_format" => model.call_format = Some(value(item)?),
                    "reasoning_calls" => model.reasoning_calls = Some(value(item)?),
                    "format_file" => model.format_file = Some(FormatFile::load(value(item)?)?),
                    _ => return Ok(false),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
