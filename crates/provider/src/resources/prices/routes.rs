//! The price endpoints: create, list, search, retrieve, update.

use crate::resources::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/prices", |p, c| p.create_price(c.params, c.attempt)).reads(&[
        "active",
        "currency",
        "expand",
        "lookup_key",
        "metadata",
        "nickname",
        "product",
        "product_data",
        "recurring",
        "tax_behavior",
        "transfer_lookup_key",
        "unit_amount",
        "unit_amount_decimal",
    ]),
    Endpoint::get("/v1/prices", |p, c| p.list_prices(c.params)).reads(&[
        "active",
        "created",
        "currency",
        "ending_before",
        "expand",
        "limit",
        "lookup_keys",
        "product",
        "recurring",
        "starting_after",
        "type",
    ]),
    Endpoint::get("/v1/prices/search", |p, c| p.search_prices(c.params)).reads(&["expand", "limit", "page", "query"]),
    Endpoint::get("/v1/prices/{id}", |p, c| p.retrieve_price(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/prices/{id}", |p, c| p.update_price(c.id, c.params, c.attempt)).reads(&[
        "active",
        "expand",
        "lookup_key",
        "metadata",
        "nickname",
        "tax_behavior",
        "transfer_lookup_key",
    ]),
];
