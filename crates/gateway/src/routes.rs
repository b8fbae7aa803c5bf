//! Several upstreams, routed by model name (`[upstreams.NAME]`), with the `[upstream]` table as
//! the upstream named `default`: which upstream serves a client model, under which name, in
//! which mode, and which upstreams to fall back to.

use crate::config::{CallFormat, Config, FormatFile, LEGACY, Mode, NamedUpstream, ReasoningCalls};

/// How a client model is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// The upstreams to try, in order (the route's own, then its fallbacks), each with the
    /// model name it is sent.
    pub(crate) chain: Vec<(String, String)>,
    pub(crate) mode: Mode,
    pub(crate) call_format: CallFormat,
    pub(crate) reasoning_calls: ReasoningCalls,
    /// The model's format file, read.
    pub(crate) format_file: Option<FormatFile>,
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else { return pattern == name };
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = rest.get(at + part.len()..).unwrap_or_default(),
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl Config {
    /// The named upstream that names `model` itself (an alias or an exact name), else the
    /// first whose pattern matches it.
    fn named_for(&self, model: &str) -> Option<(&str, &NamedUpstream)> {
        let exact = self.upstreams.iter().find(|(_, u)| {
            u.aliases.contains_key(model) || u.models.iter().any(|m| !m.contains('*') && m == model)
        });
        exact
            .or_else(|| {
                self.upstreams
                    .iter()
                    .find(|(_, u)| u.models.iter().any(|m| m.contains('*') && matches(m, model)))
            })
            .map(|(name, u)| (name.as_str(), u))
    }

    /// The name upstream `name` is sent for client model `model`.
    fn upstream_model(&self, name: &str, model: &str) -> String {
        let legacy = self.models.get(model).and_then(|m| m.upstream.clone());
        match self.upstreams.get(name) {
            Some(named) => named
                .aliases
                .get(model)
                .cloned()
                .or(legacy)
                .or_else(|| named.model.clone())
                .unwrap_or_else(|| model.to_owned()),
            None => legacy.unwrap_or_else(|| model.to_owned()),
        }
    }

    /// How `model` is served, or `None` when no upstream serves it.
    pub(crate) fn resolve(&self, model: &str) -> Option<Route> {
        let name = match self.named_for(model) {
            Some((name, _)) => name.to_owned(),
            None => match &self.default_upstream {
                Some(name) => name.clone(),
                None if !self.upstream.url.trim().is_empty() => LEGACY.to_owned(),
                None => return None,
            },
        };
        let named = self.upstreams.get(&name);
        let entry = self.models.get(model);
        let mut chain = vec![(name.clone(), self.upstream_model(&name, model))];
        for fallback in named.map(|n| n.fallback.as_slice()).unwrap_or_default() {
            if !chain.iter().any(|(n, _)| n == fallback) {
                chain.push((fallback.clone(), self.upstream_model(fallback, model)));
            }
        }
        Some(Route {
            chain,
            mode: entry
                .and_then(|e| e.mode)
                .or_else(|| named.and_then(|n| n.mode))
                .unwrap_or(self.mode),
            call_format: entry
                .and_then(|e| e.call_format)
                .or_else(|| named.and_then(|n| n.call_format))
                .unwrap_or(self.call_format),
            reasoning_calls: entry.and_then(|e| e.reasoning_calls).unwrap_or(self.reasoning_calls),
            format_file: entry.and_then(|e| e.format_file.clone()),
        })
    }

    /// The client model names the configuration names (exact names and aliases; patterns
    /// are not listable), for `GET /v1/models`.
    pub(crate) fn listed_models(&self) -> Vec<String> {
        let mut names: Vec<String> = self.models.keys().cloned().collect();
        for named in self.upstreams.values() {
            names.extend(named.aliases.keys().cloned());
            names.extend(named.models.iter().filter(|m| !m.contains('*')).cloned());
        }
        names.sort();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("claude-*", "claude-opus-4-5"));
        assert!(matches("*", "anything"));
        assert!(matches("qwen*-coder", "qwen2.5-coder"));
        assert!(!matches("qwen*-coder", "qwen2.5-coder-7b"));
        assert!(matches("gpt-5.5", "gpt-5.5") && !matches("gpt-5.5", "gpt-5.55"));
        assert!(matches("a*b*c", "a-x-b-y-c") && !matches("a*b*c", "a-x-c"));
    }

    #[test]
    fn models_route_to_their_upstreams_with_aliases_patterns_defaults_and_fallbacks() {
        let (config, _) = Config::from_toml(
            "default_upstream = \"local\"\n\
             [upstreams.local]\nurl = \"http://127.0.0.1:1\"\nmodels = [\"qwen2.5\"]\nmodel = \"qwen2.5\"\nmode = \"emulate\"\nfallback = [\"hosted\"]\n\
             [upstreams.local.aliases]\n\"gpt-5.5\" = \"qwen2.5-coder\"\n\
             [upstreams.hosted]\nurl = \"http://127.0.0.1:2\"\nmodels = [\"claude-*\"]\nmode = \"native\"\ncall_format = \"xml\"\n",
            "t.toml",
        )
        .unwrap();
        assert!(config.route_problems().is_empty(), "{:?}", config.route_problems());
        let route = config.resolve("gpt-5.5").unwrap();
        assert_eq!(
            route.chain,
            [("local".into(), "qwen2.5-coder".into()), ("hosted".into(), "gpt-5.5".into())]
        );
        assert_eq!(route.mode, Mode::Emulate);
        let route = config.resolve("claude-haiku-4-5").unwrap();
        assert_eq!(route.chain, [("hosted".into(), "claude-haiku-4-5".into())]);
        assert_eq!((route.mode, route.call_format), (Mode::Native, CallFormat::Xml));
        // Claude Code's side requests use names no upstream lists: the default route.
        let route = config.resolve("some-other-model").unwrap();
        assert_eq!(route.chain[0], ("local".into(), "qwen2.5".into()));
        assert_eq!(config.listed_models(), ["gpt-5.5", "qwen2.5"]);
    }

    #[test]
    fn without_a_default_an_unnamed_model_has_no_route() {
        let (config, _) = Config::from_toml(
            "[upstreams.local]\nurl = \"http://127.0.0.1:1\"\nmodels = [\"qwen2.5\"]\nfallback = [\"nowhere\"]\n",
            "t.toml",
        )
        .unwrap();
        assert!(config.resolve("gpt-4o").is_none());
        assert!(config.route_problems()[0].contains("`nowhere`"), "{:?}", config.route_problems());
    }
}
