use serde_json::{Value, json};

use super::*;

fn tool(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec::named(name, Some(parameters))
}

/// A tool whose `strings` are required strings and whose `flag` is an optional boolean.
fn flagged(name: &str, strings: &[&str], flag: &str) -> ToolSpec {
    let mut properties = serde_json::Map::new();
    for key in strings {
        properties.insert((*key).to_owned(), json!({"type": "string"}));
    }
    properties.insert(flag.to_owned(), json!({"type": "boolean"}));
    tool(name, json!({"type": "object", "properties": properties, "required": strings}))
}

fn concerts() -> ToolSpec {
    tool(
        "concert_search",
        json!({"type": "object", "properties": {
            "genre": {"type": "string"},
            "location": {"type": "string"},
            "date": {"type": "string", "enum": ["this weekend", "next weekend", "today"]},
            "price_range": {"type": "string", "enum": ["free", "cheap", "moderate", "expensive"]}
        }, "required": ["genre", "location", "date"]}),
    )
}

fn added(message: &str, spec: &ToolSpec, arguments: Value) -> Option<Value> {
    let (arguments, _) = Stated::of(message).fill(spec, &arguments.to_string())?;
    serde_json::from_str(&arguments).ok()
}

#[test]
fn issue_24_an_enum_value_the_user_wrote_is_added_when_left_out() {
    let call = json!({"genre": "classical", "location": "Los Angeles", "date": "this weekend"});
    let message = "Find me a classical concert this weekend in Los Angeles with cheap tickets.";
    let (arguments, what) =
        Stated::of(message).fill(&concerts(), &call.to_string()).unwrap_or_default();
    assert_eq!(what, ["price_range = \"cheap\""]);
    let arguments: Value = serde_json::from_str(&arguments).unwrap();
    assert_eq!(arguments["price_range"], "cheap");
    assert_eq!(arguments["genre"], "classical");
    // Given already, or required: nothing to add.
    let given = json!({"genre": "classical", "location": "Los Angeles", "date": "this weekend",
        "price_range": "moderate"});
    assert_eq!(added(message, &concerts(), given), None);
    // Written in another case, it is the enum's own spelling that is added.
    let loud = "Find me a classical concert this weekend in Los Angeles, CHEAP tickets.";
    assert_eq!(added(loud, &concerts(), call.clone()).unwrap()["price_range"], "cheap");
    // Two values of the same enum: which one is meant is not plain.
    let two = "A classical concert in Los Angeles this weekend, cheap or free.";
    assert_eq!(added(two, &concerts(), call.clone()), None);
    // A word that only contains a value is not the value ("cheaply").
    let part = "Find me a classical concert this weekend in Los Angeles, cheaply.";
    assert_eq!(added(part, &concerts(), call), None);
}

#[test]
fn issue_24_a_flag_whose_name_the_user_wrote_is_set() {
    let era = flagged("geology_get_era", &["era_name"], "calculate_years_ago");
    let call = json!({"era_name": "Ice age"});
    let message = "Calculate how many years ago was the Ice age?";
    assert_eq!(added(message, &era, call.clone()).unwrap()["calculate_years_ago"], true);
    // Every word of the name must be written.
    assert_eq!(added("How long ago was the Ice age? Calculate it.", &era, call.clone()), None);
    let record = flagged("crime_record_get_record", &["case_number", "county"], "details");
    let call = json!({"case_number": "CA123456", "county": "San Diego County"});
    let message =
        "Look up details of a felony crime record for case number CA123456 in San Diego County";
    assert_eq!(added(message, &record, call.clone()).unwrap()["details"], true);
    // Camel case is split too.
    let camel = tool(
        "report",
        json!({"type": "object", "properties": {"id": {"type": "string"},
            "includeDetails": {"type": "boolean"}}, "required": ["id"]}),
    );
    let call = json!({"id": "7"});
    let message = "Report 7, and include details.";
    assert_eq!(added(message, &camel, call).unwrap()["includeDetails"], true);
}

#[test]
fn issue_24_a_flag_set_to_false_whose_words_the_user_wrote_is_set() {
    let strings = ["molecule", "organelle"];
    let mut lookup = flagged("cell_biology_function_lookup", &strings, "specific_function");
    if let Some(parameters) = lookup.parameters.as_mut() {
        parameters["required"] = json!(["molecule", "organelle", "specific_function"]);
    }
    let message = "What is the function of ATP in the mitochondria and does it have a specific \
        function within this organelle?";
    let call = json!({"molecule": "ATP", "organelle": "mitochondria", "specific_function": false});
    let (arguments, what) = Stated::of(message).fill(&lookup, &call.to_string()).unwrap();
    assert_eq!(what, ["specific_function = true (was false)"]);
    let arguments: Value = serde_json::from_str(&arguments).unwrap();
    assert_eq!(arguments["specific_function"], true);
    // `true` already, or not a flag: nothing to change.
    let call = json!({"molecule": "ATP", "organelle": "mitochondria", "specific_function": true});
    assert_eq!(added(message, &lookup, call), None);
    // A required flag left out is the schema check's to ask for, not this one's to add.
    let call = json!({"molecule": "ATP", "organelle": "mitochondria"});
    assert_eq!(added(message, &lookup, call), None);
    // "Few" takes it back.
    let traits = tool(
        "five_factor_model_analyse",
        json!({"type": "object", "properties": {
            "talkative": {"type": "boolean"}, "artistic_interests": {"type": "boolean"},
            "lazy": {"type": "boolean"}
        }, "required": ["talkative", "artistic_interests", "lazy"]}),
    );
    let message = "I'm talkative, have few artistic interests and tend to be lazy.";
    let call = json!({"talkative": true, "artistic_interests": false, "lazy": false});
    let expected = json!({"talkative": true, "artistic_interests": false, "lazy": true});
    assert_eq!(added(message, &traits, call), Some(expected));
}

#[test]
fn issue_24_a_negated_value_is_not_added() {
    let search = flagged("court_case_search", &["docket_number", "location"], "full_text");
    let call = json!({"docket_number": "123456", "location": "Texas"});
    for message in [
        "Find the details of the court case 123456 in Texas. Don't return full text",
        "Find court case 123456 in Texas, without the full text.",
        "Court case 123456 in Texas; I do not need the full text.",
    ] {
        assert_eq!(added(message, &search, call.clone()), None, "{message}");
    }
}

#[test]
fn issue_24_a_value_in_a_part_of_the_message_for_another_call_is_not_added() {
    let recipes = tool(
        "recipe_search_find",
        json!({"type": "object", "properties": {
            "dish": {"type": "string"},
            "diet": {"type": "string", "enum": ["Vegan", "Vegetarian", "Keto"]}
        }, "required": ["dish"]}),
    );
    let message = "Search for a Chicken Noodle Soup recipe and a Vegan Salad recipe.";
    let soup = json!({"dish": "Chicken Noodle Soup"});
    assert_eq!(added(message, &recipes, soup), None);
    let salad = json!({"dish": "Salad"});
    assert_eq!(added(message, &recipes, salad).unwrap()["diet"], "Vegan");
    // A part of its own with no value of another call belongs to the call.
    let odds = tool(
        "probability_of_event",
        json!({"type": "object", "properties": {
            "success_outcomes": {"type": "integer"},
            "total_outcomes": {"type": "integer"},
            "format_as_ratio": {"type": "boolean"}
        }, "required": ["success_outcomes", "total_outcomes"]}),
    );
    let call = json!({"success_outcomes": 13, "total_outcomes": 52});
    let message =
        "What are the odds of pulling a heart from a deck of 52 cards? Format it as ratio.";
    assert_eq!(added(message, &odds, call).unwrap()["format_as_ratio"], true);
}

#[test]
fn unreadable_arguments_and_tools_without_options_are_left_alone() {
    let message = "Find me a classical concert this weekend in Los Angeles with cheap tickets.";
    let stated = Stated::of(message);
    assert_eq!(stated.fill(&concerts(), "not json"), None);
    assert_eq!(stated.fill(&concerts(), "[1, 2]"), None);
    let bare = ToolSpec::named("f", None);
    assert_eq!(stated.fill(&bare, "{}"), None);
    assert_eq!(Stated::of("").fill(&concerts(), "{}"), None);
    // Integer enums and untyped parameters are not filled.
    let levels = tool(
        "levels",
        json!({"type": "object", "properties": {"level": {"enum": ["cheap"]},
            "n": {"type": "integer", "enum": [1, 2]}}}),
    );
    assert_eq!(stated.fill(&levels, "{}"), None);
}

#[test]
fn messages_are_split_at_sentences_clauses_and_joiners() {
    let parts = |text: &str| -> Vec<Vec<String>> {
        Stated::of(text).parts.into_iter().map(|p| p.words).collect()
    };
    assert_eq!(
        parts("Soup and salad, then bread. Also tea! Brand: Äpfel"),
        [vec!["soup"], vec!["salad"], vec!["bread"], vec!["tea"], vec!["brand"], vec!["äpfel"]]
    );
    // A dot inside a number or a name does not end a sentence; a joiner inside a word is
    // no joiner.
    assert_eq!(parts("Pay 3.5 to Andrew"), [vec!["pay", "3", "5", "to", "andrew"]]);
    // Values are numbers and capitalized words after the first.
    let stated = Stated::of("Find 2 Vegan Salad recipes");
    assert_eq!(stated.parts[0].values, ["2", "vegan", "salad"]);
}

/// Only the user's last message counts: an earlier one asked for an earlier call.
#[test]
fn issue_24_only_the_users_last_message_states_values() {
    use crate::chat::grounding::Grounding;
    use crate::chat::types::{ChatRequest, Message};
    let ask = |messages: Vec<Message>| {
        let req = ChatRequest { messages, tools: vec![concerts()], ..ChatRequest::default() };
        let call = json!({"genre": "jazz", "location": "Paris", "date": "today"});
        Grounding::of(&req).settle_options(&concerts(), &call.to_string())
    };
    let cheap = Message::User("A jazz concert in Paris today with cheap tickets.".into());
    let (_, changed) = ask(vec![cheap.clone()]).unwrap();
    assert_eq!(changed, ["set price_range = \"cheap\""]);
    let later = Message::User("And a jazz concert in Paris today?".into());
    let earlier = Message::Assistant { text: "Found one.".into(), calls: Vec::new() };
    assert_eq!(ask(vec![cheap, earlier, later]), None);
}

/// The work per value is bounded: a value is looked for at the first 16 places its first
/// word stands, so a long message of that word costs no more than a short one (and a value
/// written after them is not found).
#[test]
fn issue_24_a_value_is_looked_for_where_its_first_word_first_stands() {
    let sorts = tool(
        "search",
        json!({"type": "object", "properties": {"q": {"type": "string"},
            "order": {"type": "string", "enum": ["the newest", "the oldest"]}},
            "required": ["q"]}),
    );
    let call = json!({"q": "jazz"});
    let early = format!("Jazz, the newest first. {}", "And the rest. ".repeat(100_000));
    assert_eq!(added(&early, &sorts, call.clone()).unwrap()["order"], "the newest");
    let late = format!("Jazz. {}Sort by the newest first.", "And the rest. ".repeat(20));
    assert_eq!(added(&late, &sorts, call), None);
}
