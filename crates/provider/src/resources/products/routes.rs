//! The product endpoints: create, list, search, retrieve, update, delete.

use crate::resources::endpoint::Endpoint;

const FIELDS: &[&str] = &[
    "active",
    "default_price_data",
    "description",
    "expand",
    "id",
    "images",
    "metadata",
    "name",
    "shippable",
    "statement_descriptor",
    "unit_label",
    "url",
];

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/products", |p, c| p.create_product(c.params, c.attempt)).reads(FIELDS),
    Endpoint::get("/v1/products", |p, c| p.list_products(c.params)).reads(&[
        "active",
        "created",
        "ending_before",
        "expand",
        "ids",
        "limit",
        "shippable",
        "starting_after",
        "url",
    ]),
    Endpoint::get("/v1/products/search", |p, c| p.search_products(c.params))
        .reads(&["expand", "limit", "page", "query"]),
    Endpoint::get("/v1/products/{id}", |p, c| p.retrieve_product(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/products/{id}", |p, c| p.update_product(c.id, c.params, c.attempt)).reads(&[
        "active",
        "default_price",
        "description",
        "expand",
        "images",
        "metadata",
        "name",
        "shippable",
        "statement_descriptor",
        "unit_label",
        "url",
    ]),
    Endpoint::delete("/v1/products/{id}", |p, c| p.delete_product(c.id, c.attempt)).reads(&[]),
];
