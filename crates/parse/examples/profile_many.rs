//! Parses a workload many times, for profilers: `cargo run --release --example profile_many -- many|long [stream]`.
use toolshim_parse::{Config, Parsed, StreamParser, parse};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map(String::as_str).unwrap_or("many");
    let stream = args.get(2).is_some();
    let input = if kind == "many" {
        "some prose <tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"celsius\"}}\n</tool_call>\n".repeat(2000)
    } else {
        format!(
            "<tool_call>\n{{\"name\":\"write_file\",\"arguments\":{{\"path\":\"a.txt\",\"content\":\"{}\"}}}}\n</tool_call>",
            "line é 東京 😀 \\n \\\" text ".repeat(8000)
        )
    };
    let config = Config::default();
    let mut n = 0;
    for _ in 0..200 {
        if stream {
            let mut parser = StreamParser::new(&config);
            let mut events = Vec::new();
            let mut parsed = Parsed::default();
            let mut rest = input.as_str();
            while !rest.is_empty() {
                let mut cut = rest.len().min(4);
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                let (chunk, tail) = rest.split_at(cut);
                parser.feed(chunk, &mut events);
                for event in events.drain(..) {
                    parsed.push(event);
                }
                rest = tail;
            }
            parser.finish(&mut events);
            n += parsed.calls.len();
        } else {
            n += parse(&input, &config).calls.len();
        }
    }
    std::hint::black_box(n);
}
