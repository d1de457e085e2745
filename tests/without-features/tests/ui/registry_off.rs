// `registry::check` is behind cache-key's `registry` feature, which this
// package leaves off: the error must name the feature.
fn main() {
    cache_key::registry::check().unwrap();
}
