//! The customer endpoints: create, list, search, retrieve, update, delete, and the
//! customer's payment methods (listed, or one retrieved).

use crate::resources::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/customers", |p, c| p.create_customer(c.params, c.attempt)).reads(&[
        "description",
        "email",
        "expand",
        "invoice_settings[default_payment_method]",
        "metadata",
        "name",
        "payment_method",
        "phone",
    ]),
    Endpoint::get("/v1/customers", |p, c| p.list_customers(c.params)).reads(&[
        "created",
        "email",
        "ending_before",
        "expand",
        "limit",
        "starting_after",
    ]),
    Endpoint::get("/v1/customers/search", |p, c| p.search_customers(c.params))
        .reads(&["expand", "limit", "page", "query"]),
    Endpoint::get("/v1/customers/{id}", |p, c| p.retrieve_customer(c.id)).reads(&["expand"]),
    Endpoint::post("/v1/customers/{id}", |p, c| {
        p.update_customer(c.id, c.params, c.attempt)
    })
    .reads(&[
        "description",
        "email",
        "expand",
        "invoice_settings[default_payment_method]",
        "metadata",
        "name",
        "phone",
    ]),
    Endpoint::delete("/v1/customers/{id}", |p, c| p.delete_customer(c.id, c.attempt)).reads(&[]),
    Endpoint::get("/v1/customers/{id}/payment_methods", |p, c| {
        p.list_customer_payment_methods(c.id, c.params)
    })
    .reads(&["ending_before", "expand", "limit", "starting_after", "type"]),
    Endpoint::get("/v1/customers/{id}/payment_methods/{sub}", |p, c| {
        p.retrieve_customer_payment_method(c.id, c.sub)
    })
    .reads(&["expand"]),
];
