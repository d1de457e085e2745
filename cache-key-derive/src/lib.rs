use proc_macro::TokenStream;
#[proc_macro_derive(CacheKey)]
pub fn d(_i: TokenStream) -> TokenStream {
    TokenStream::new()
}
