use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "clinic", operation = "patients")]
struct Patients {
    #[tenant]
    clinic: u32,
    #[criterion]
    last_visit_year: u16,
    #[criterion]
    date_of_birth: String,
}

fn main() {}
