# The playground's GraphiQL bundle, built from the npm packages pinned in
# playground/package-lock.json (make playground does the same outside Docker).
FROM node:20 AS playground
WORKDIR /src/playground
COPY playground/package.json playground/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY playground/ ./
RUN node build.mjs

# The sale page's bundle, likewise (make salepage).
FROM node:20 AS salepage
WORKDIR /src/salepage
COPY salepage/package.json salepage/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY salepage/ ./
RUN node build.mjs

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=playground /src/playground/dist/assets playground/dist/assets
COPY --from=salepage /src/salepage/dist/assets salepage/dist/assets
RUN CGO_ENABLED=0 go build -o /seckill ./cmd/seckill

FROM gcr.io/distroless/static-debian12
COPY --from=build /seckill /seckill
EXPOSE 8080
ENTRYPOINT ["/seckill"]
