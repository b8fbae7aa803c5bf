use super::{Piece, pieces};

#[test]
fn patterns_read_as_literals_whitespace_a_name_and_lazy_gaps() {
    let gpt = pieces(r"<\|channel\|>commentary to=functions\.(?P<name>\w+).*?<\|message\|>", "p");
    assert_eq!(
        gpt.ok(),
        Some(vec![
            Piece::Lit("<|channel|>commentary to=functions.".into()),
            Piece::Group("name".into()),
            Piece::Lazy,
            Piece::Lit("<|message|>".into()),
        ])
    );
    let qwen = pieces(r"<tool_call>\s*<function=(?P<name>[^>\s]+)>", "p");
    assert_eq!(
        qwen.ok(),
        Some(vec![
            Piece::Lit("<tool_call>".into()),
            Piece::Ws,
            Piece::Lit("<function=".into()),
            Piece::Group("name".into()),
            Piece::Lit(">".into()),
        ])
    );
}

#[test]
fn alternations_and_optional_groups_are_errors_that_name_the_field() {
    for pattern in [r"(?:^|<think>\s*)", r"a|b", r"(?:<\|message_model\|>)?x", r"^<x>", r"<x>.*"] {
        let err = pieces(pattern, "fields.thinking.open_pattern").err();
        let field = err.as_ref().and_then(|err| err.field());
        assert_eq!(field, Some("fields.thinking.open_pattern"), "{pattern}");
    }
}
