use cache_key::CriterionValue;

#[derive(CriterionValue)]
#[criterion(rename_all = "snake_case")]
enum SortOrder {
    TitleAsc,
    ByField(String),
}

fn main() {}
