use cache_key::CriterionValue;

#[derive(CriterionValue)]
#[criterion(rename_all = "lowercase")]
enum Status {
    OnShelf,
    #[criterion(rename = "onshelf")]
    Reserved,
}

fn main() {}
